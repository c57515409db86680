// Softmax cross-entropy per row of logits: losses[n] = lse − logits[target];
// the backward adds (softmax − onehot(target))·grad_losses[n], recomputing
// the softmax from the saved lse.
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

void CheckTargets(const int32_t* targets, int64_t rows, int64_t vocab,
                  const char* op) {
  for (int64_t n = 0; n < rows; ++n) {
    CHECK(targets[n] >= 0 && targets[n] < vocab)
        << op << ": target " << targets[n] << " at row " << n
        << " outside [0, " << vocab << ")";
  }
}

}  // namespace

void CpuBackend::CrossEntropyForward(const CrossEntropyParams& p) {
  const int64_t rows = p.logits.shape.rows();
  const int64_t vocab = p.logits.shape.cols();
  CheckCrossEntropy(p);
  const float* logits = p.logits.f32();
  const int32_t* targets = p.targets.i32();
  CheckTargets(targets, rows, vocab, "cross_entropy");
  float* losses = p.losses.f32();
  float* lse = p.lse.empty() ? nullptr : p.lse.f32();
#pragma omp parallel for num_threads(threads_) if (rows * vocab >= cpu::kParallelMin)
  for (int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * vocab;
    const float row_max = cpu::Max(row, vocab);
    const float sum = cpu::ExpShiftedSum(row, row_max, nullptr, vocab);
    const float row_lse = row_max + std::log(sum);
    losses[n] = row_lse - row[targets[n]];
    if (lse != nullptr) lse[n] = row_lse;
  }
}

void CpuBackend::CrossEntropyBackward(const CrossEntropyBackwardParams& p) {
  if (p.grad_logits.empty()) return;
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::CrossEntropyBackward)) return;
  const int64_t rows = p.logits.shape.rows();
  const int64_t vocab = p.logits.shape.cols();
  CheckCrossEntropyBackward(p);
  const float* logits = p.logits.f32();
  const int32_t* targets = p.targets.i32();
  CheckTargets(targets, rows, vocab, "cross_entropy backward");
  const float* lse = p.lse.f32();
  const float* grad_losses = p.grad_losses.f32();
  float* grad_logits = p.grad_logits.f32();
#pragma omp parallel for num_threads(threads_) if (rows * vocab >= cpu::kParallelMin)
  for (int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * vocab;
    float* grad_row = grad_logits + n * vocab;
    const float row_lse = lse[n];
    const float g = grad_losses[n];
    // Elementwise, each logit read before its gradient is written: in place
    // (grad_row == row) is fine.
    cpu::ScaledExpShifted(row, row_lse, g, grad_row, !p.overwrite, vocab);
    grad_row[targets[n]] -= g;
  }
}

}  // namespace smallem
