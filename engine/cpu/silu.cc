// SiLU: y = x·σ(x); dy/dx = σ(x)(1 + x(1 − σ(x))).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::SiluForward(const UnaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SiluForward)) return;
  CheckUnary(p, "silu");
  const float* in = p.in.f32();
  float* out = p.out.f32();
  cpu::ForChunks(threads_, p.in.numel(), [&](int64_t begin, int64_t count) {
    cpu::SiluForward(in + begin, out + begin, count);
  });
}

void CpuBackend::SiluBackward(const UnaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::SiluBackward)) return;
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "silu backward");
  const float* in = p.in.f32();
  const float* g = p.grad_out.f32();
  float* grad_in = p.grad_in.f32();
  cpu::ForChunks(threads_, p.in.numel(), [&](int64_t begin, int64_t count) {
    cpu::SiluBackward(in + begin, g + begin, grad_in + begin, count);
  });
}

}  // namespace smallem
