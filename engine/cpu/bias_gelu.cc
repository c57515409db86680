// The feed-forward's bias and GELU in one pass (BiasGeluParams in
// engine/backend.h): x + bias is formed in registers and never written, so
// the (N, C) buffer is read once and written once forward, and backward
// read twice (x, grad_out) and written once, with the bias's column sum in
// the same pass, where BiasAdd, GELU, the zeroed gradient and the column sum
// made five passes more. The math is cpu::BiasGeluForward / BiasGeluBackward
// (vector_math.h), element for element that of the separate ops.
#include <omp.h>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::BiasGeluForward(const BiasGeluParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::BiasGeluForward)) return;
  CheckBiasGelu(p);
  const int64_t rows = p.x.shape.rows(), cols = p.x.shape.cols();
  const float* x = p.x.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  float* out = p.out.f32();
  // Each vector of out is written after its vector of x is read: out may
  // alias x.
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    cpu::BiasGeluForward(x + r * cols, bias, out + r * cols, cols);
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
  // Each thread owns a slice of channels and walks every row in order, so
  // grad_bias sums the rows in order whatever the thread count (as
  // BiasBackward does).
#pragma omp parallel num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = cpu::PartBegin(cols, part, parts);
    const int64_t count = cpu::PartBegin(cols, part + 1, parts) - begin;
    for (int64_t r = 0; r < rows && count > 0; ++r) {
      const int64_t at = r * cols + begin;
      cpu::BiasGeluBackward(x + at, bias == nullptr ? nullptr : bias + begin, g + at,
                            grad_x == nullptr ? nullptr : grad_x + at, p.overwrite,
                            grad_bias == nullptr ? nullptr : grad_bias + begin, count);
    }
  }
}

}  // namespace smallem
