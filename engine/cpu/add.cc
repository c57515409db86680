// Elementwise addition and its gradient (the identity to both inputs).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::Add(const BinaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::Add)) return;
  CheckBinary(p, "add");
  const int64_t n = p.out.numel();
  // No __restrict: out may alias a or b, which elementwise order allows.
  const float* a = p.a.f32();
  const float* b = p.b.f32();
  float* out = p.out.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void CpuBackend::AddBackward(const BinaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::AddBackward)) return;
  CheckBinaryBackward(p, /*gradients_read_inputs=*/false, "add backward");
  const int64_t n = p.grad_out.numel();
  const float* g = p.grad_out.f32();
  for (const Tensor* grad : {&p.grad_a, &p.grad_b}) {
    if (grad->empty()) continue;
    float* dst = grad->f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) dst[i] += g[i];
  }
}

}  // namespace smallem
