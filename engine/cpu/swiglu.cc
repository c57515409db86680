// SwiGLU, fused: out = silu(gate)·up. Gradients: d/d(up) = silu(gate),
// d/d(gate) = up·σ(gate)(1 + gate(1 − σ(gate))).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::SwiGluForward(const SwiGluParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SwiGluForward)) return;
  CheckSwiGlu(p);
  const float* gate = p.gate.f32();
  const float* up = p.up.f32();
  float* out = p.out.f32();
  cpu::ForChunks(threads_, p.gate.numel(), [&](int64_t begin, int64_t count) {
    cpu::SwiGluForward(gate + begin, up + begin, out + begin, count);
  });
}

void CpuBackend::SwiGluBackward(const SwiGluBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SwiGluBackward)) return;
  CheckSwiGluBackward(p);
  if (p.grad_gate.empty() && p.grad_up.empty()) return;
  const float* gate = p.gate.f32();
  const float* up = p.up.f32();
  const float* g = p.grad_out.f32();
  float* grad_gate = p.grad_gate.empty() ? nullptr : p.grad_gate.f32();
  float* grad_up = p.grad_up.empty() ? nullptr : p.grad_up.f32();
  cpu::ForChunks(threads_, p.gate.numel(), [&](int64_t begin, int64_t count) {
    cpu::SwiGluBackward(gate + begin, up + begin, g + begin,
                        grad_gate == nullptr ? nullptr : grad_gate + begin,
                        grad_up == nullptr ? nullptr : grad_up + begin, p.overwrite, count);
  });
}

}  // namespace smallem
