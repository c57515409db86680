// GELU, tanh approximation: y = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³).
// Computed as y = x·σ(2u), the same function (½(1 + tanh u) = σ(2u)) without
// the cancellation of 1 + tanh(u) for negative x.
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

constexpr float kTwoSqrt2OverPi = 2 * 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

}  // namespace

void CpuBackend::GeluForward(const UnaryParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GeluForward)) return;
  CheckUnary(p, "gelu");
  const int64_t n = p.in.numel();
  const float* in = p.in.f32();
  float* out = p.out.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    out[i] = x * cpu::Sigmoid(kTwoSqrt2OverPi * (x + kCubic * x * x * x));
  }
}

void CpuBackend::GeluBackward(const UnaryBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GeluBackward)) return;
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "gelu backward");
  const int64_t n = p.in.numel();
  const float* in = p.in.f32();
  const float* g = p.grad_out.f32();
  float* grad_in = p.grad_in.f32();
  // d/dx x·σ(2u) = σ + x·σ(1 − σ)·2u', 2u' = 2√(2/π)(1 + 3·0.044715x²).
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float s = cpu::Sigmoid(kTwoSqrt2OverPi * (x + kCubic * x * x * x));
    const float du = kTwoSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    grad_in[i] += g[i] * (s + x * s * (1.0f - s) * du);
  }
}

}  // namespace smallem
