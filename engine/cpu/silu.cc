// SiLU: y = x·σ(x); dy/dx = σ(x)(1 + x(1 − σ(x))).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::SiluForward(const UnaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SiluForward)) return;
  CheckUnary(p, "silu");
  const int64_t n = p.in.numel();
  const float* in = p.in.f32();
  float* out = p.out.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * cpu::Sigmoid(in[i]);
}

void CpuBackend::SiluBackward(const UnaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SiluBackward)) return;
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "silu backward");
  const int64_t n = p.in.numel();
  const float* in = p.in.f32();
  const float* g = p.grad_out.f32();
  float* grad_in = p.grad_in.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float s = cpu::Sigmoid(in[i]);
    grad_in[i] += g[i] * s * (1.0f + in[i] * (1.0f - s));
  }
}

}  // namespace smallem
