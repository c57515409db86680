// Row-broadcast bias: x[n, :] += bias, and its gradient Σ_n grad_out[n, :].
#include <omp.h>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::BiasAdd(const BiasAddParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::BiasAdd)) return;
  CheckBiasAdd(p);
  const int64_t cols = p.bias.numel();
  const int64_t rows = p.x.shape.rows();
  const float* bias = p.bias.f32();
  float* x = p.x.f32();
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void CpuBackend::BiasBackward(const BiasBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::BiasBackward)) return;
  if (p.grad_bias.empty()) return;
  CheckBiasBackward(p);
  const int64_t cols = p.grad_bias.numel();
  const int64_t rows = p.grad_out.shape.rows();
  const float* g = p.grad_out.f32();
  float* grad_bias = p.grad_bias.f32();
  // Each thread owns a slice of channels and sums rows in order: the result
  // does not depend on the thread count or scheduling.
#pragma omp parallel num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = cpu::PartBegin(cols, part, parts);
    const int64_t end = cpu::PartBegin(cols, part + 1, parts);
    for (int64_t r = 0; r < rows; ++r) {
      const float* g_row = g + r * cols;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) grad_bias[c] += g_row[c];
    }
  }
}

}  // namespace smallem
