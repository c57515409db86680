// GELU, tanh approximation: y = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³).
// Computed as y = x·σ(2u), the same function (½(1 + tanh u) = σ(2u)) without
// the cancellation of 1 + tanh(u) for negative x; the math is
// cpu::GeluForward/GeluBackward (vector_math.h).
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::GeluForward(const UnaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GeluForward)) return;
  CheckUnary(p, "gelu");
  const float* in = p.in.f32();
  float* out = p.out.f32();
  cpu::ForChunks(threads_, p.in.numel(), [&](int64_t begin, int64_t count) {
    cpu::GeluForward(in + begin, out + begin, count);
  });
}

void CpuBackend::GeluBackward(const UnaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GeluBackward)) return;
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "gelu backward");
  const float* in = p.in.f32();
  const float* g = p.grad_out.f32();
  float* grad_in = p.grad_in.f32();
  cpu::ForChunks(threads_, p.in.numel(), [&](int64_t begin, int64_t count) {
    cpu::GeluBackward(in + begin, g + begin, grad_in + begin, count);
  });
}

}  // namespace smallem
