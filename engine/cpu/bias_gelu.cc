// The feed-forward's bias and GELU in one pass (BiasGeluParams in
// engine/backend.h): each row's x + bias goes through a slice of scratch
// that stays in L1, so the (N, C) buffer is read once and written once
// forward, and backward read twice (x, grad_out) and written once, where
// BiasAdd, GELU, the zeroed gradient and the bias's column sum made five
// passes more. The math is cpu::GeluForward / GeluBackward
// (vector_math.h), element for element that of the separate ops.
#include <omp.h>

#include <algorithm>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

// pre[c] = x[c] + bias[c] (or x[c] without a bias) for c in [0, count).
void AddBias(const float* x, const float* bias, int64_t count, float* pre) {
  if (bias == nullptr) {
    std::copy(x, x + count, pre);
    return;
  }
#pragma omp simd
  for (int64_t c = 0; c < count; ++c) pre[c] = x[c] + bias[c];
}

}  // namespace

void CpuBackend::BiasGeluForward(const BiasGeluParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::BiasGeluForward)) return;
  CheckBiasGelu(p);
  const int64_t rows = p.x.shape.rows(), cols = p.x.shape.cols();
  const float* x = p.x.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  float* out = p.out.f32();
  // out is written only after its row of x is read: out may alias x.
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* out_row = out + r * cols;
    AddBias(x + r * cols, bias, cols, out_row);
    cpu::GeluForward(out_row, out_row, cols);
  }
}

void CpuBackend::BiasGeluBackward(const BiasGeluBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::BiasGeluBackward)) return;
  if (p.grad_x.empty() && p.grad_bias.empty()) return;
  CheckBiasGeluBackward(p);
  const int64_t rows = p.x.shape.rows(), cols = p.x.shape.cols();
  const float* x = p.x.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  const float* g = p.grad_out.f32();
  float* grad_x = p.grad_x.empty() ? nullptr : p.grad_x.f32();
  float* grad_bias = p.grad_bias.empty() ? nullptr : p.grad_bias.f32();
  const bool overwrite = p.overwrite;
  // Each thread owns a slice of channels and walks every row in order, so
  // grad_bias sums the rows in order whatever the thread count (as
  // BiasBackward does).
#pragma omp parallel num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = cpu::PartBegin(cols, part, parts);
    const int64_t count = cpu::PartBegin(cols, part + 1, parts) - begin;
    float* pre = cpu::ThreadScratch(static_cast<size_t>(2 * count));
    float* d = pre + count;
    for (int64_t r = 0; r < rows && count > 0; ++r) {
      const int64_t at = r * cols + begin;
      AddBias(x + at, bias == nullptr ? nullptr : bias + begin, count, pre);
      // d = 0 + gelu'·grad_out: the value GELU's backward adds to a zeroed
      // gradient. Written straight into a gradient being overwritten.
      float* dst = overwrite && grad_x != nullptr ? grad_x + at : d;
      std::fill(dst, dst + count, 0.0f);
      cpu::GeluBackward(pre, g + at, dst, count);
      if (grad_x != nullptr && dst == d) {
        float* gx = grad_x + at;
#pragma omp simd
        for (int64_t c = 0; c < count; ++c) gx[c] += d[c];
      }
      if (grad_bias != nullptr) {
        float* gb = grad_bias + begin;
#pragma omp simd
        for (int64_t c = 0; c < count; ++c) gb[c] += dst[c];
      }
    }
  }
}

}  // namespace smallem
