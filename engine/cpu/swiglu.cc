// SwiGLU, fused: out = silu(gate)·up. Gradients: d/d(up) = silu(gate),
// d/d(gate) = up·σ(gate)(1 + gate(1 − σ(gate))).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::SwiGluForward(const SwiGluParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SwiGluForward)) return;
  CheckSwiGlu(p);
  const int64_t n = p.gate.numel();
  const float* gate = p.gate.f32();
  const float* up = p.up.f32();
  float* out = p.out.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    out[i] = gate[i] * cpu::Sigmoid(gate[i]) * up[i];
  }
}

void CpuBackend::SwiGluBackward(const SwiGluBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SwiGluBackward)) return;
  CheckSwiGluBackward(p);
  const int64_t n = p.gate.numel();
  const bool want_gate = !p.grad_gate.empty();
  const bool want_up = !p.grad_up.empty();
  const float* gate = p.gate.f32();
  const float* up = p.up.f32();
  const float* g = p.grad_out.f32();
  // One loop per combination keeps each loop branch-free and vectorized.
  float* grad_gate = want_gate ? p.grad_gate.f32() : nullptr;
  float* grad_up = want_up ? p.grad_up.f32() : nullptr;
  if (want_gate && want_up) {
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float s = cpu::Sigmoid(gate[i]);
      grad_up[i] += g[i] * gate[i] * s;
      grad_gate[i] += g[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    }
  } else if (want_gate) {
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float s = cpu::Sigmoid(gate[i]);
      grad_gate[i] += g[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    }
  } else if (want_up) {
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      grad_up[i] += g[i] * gate[i] * cpu::Sigmoid(gate[i]);
    }
  }
}

}  // namespace smallem
