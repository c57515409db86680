// Elementwise product and its gradient: d(a·b)/da = b, d(a·b)/db = a.
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::Mul(const BinaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::Mul)) return;
  CheckBinary(p, "mul");
  const int64_t n = p.out.numel();
  // No __restrict: out may alias a or b, which elementwise order allows.
  const float* a = p.a.f32();
  const float* b = p.b.f32();
  float* out = p.out.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void CpuBackend::MulBackward(const BinaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::MulBackward)) return;
  CheckBinaryBackward(p, /*gradients_read_inputs=*/true, "mul backward");
  const int64_t n = p.grad_out.numel();
  const float* g = p.grad_out.f32();
  // grad_a needs b and grad_b needs a.
  if (!p.grad_a.empty()) {
    const float* b = p.b.f32();
    float* grad_a = p.grad_a.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) grad_a[i] += g[i] * b[i];
  }
  if (!p.grad_b.empty()) {
    const float* a = p.a.f32();
    float* grad_b = p.grad_b.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) grad_b[i] += g[i] * a[i];
  }
}

}  // namespace smallem
