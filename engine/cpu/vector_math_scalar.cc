// engine/cpu/vector_math.h without Highway (the GPU machine builds the
// engine from sources alone): plain loops over cpu::Exp (exp.h), which
// GCC vectorizes under `omp simd`.
#ifndef SMALLEM_HAVE_HWY

#include <limits>

#include "engine/cpu/exp.h"
#include "engine/cpu/vector_math.h"

namespace smallem::cpu {
namespace {

constexpr float kTwoSqrt2OverPi = 2 * 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline float GeluArg(float x) { return kTwoSqrt2OverPi * x * (1.0f + kCubic * x * x); }

}  // namespace

// GELU'(x) = σ + x·σ(1 − σ)·2u', 2u' = 2√(2/π)(1 + 3·0.044715x²).
inline float GeluSlope(float x) {
  const float s = Sigmoid(GeluArg(x));
  const float du = kTwoSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return s + x * s * (1.0f - s) * du;
}

void BiasGeluForward(const float* in, const float* bias, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = bias == nullptr ? in[i] : in[i] + bias[i];
    out[i] = x * Sigmoid(GeluArg(x));
  }
}

void GeluForward(const float* in, float* out, int64_t n) { BiasGeluForward(in, nullptr, out, n); }

void GeluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) grad_in[i] += grad_out[i] * GeluSlope(in[i]);
}

void BiasGeluBackward(const float* in, const float* bias, const float* grad_out, float* grad_in,
                      bool overwrite, float* grad_bias, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = grad_out[i] * GeluSlope(bias == nullptr ? in[i] : in[i] + bias[i]);
    if (grad_in != nullptr) grad_in[i] = overwrite ? v : grad_in[i] + v;
    if (grad_bias != nullptr) grad_bias[i] += v;
  }
}

void SiluForward(const float* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * Sigmoid(in[i]);
}

void SiluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float s = Sigmoid(in[i]);
    grad_in[i] += grad_out[i] * s * (1.0f + in[i] * (1.0f - s));
  }
}

void SwiGluForward(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

void SwiGluBackward(const float* gate, const float* up, const float* grad_out,
                    float* grad_gate, float* grad_up, bool overwrite, int64_t n) {
  // With overwrite the sum starts from 0: the value added to zeros.
  if (grad_up != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      grad_up[i] = (overwrite ? 0.0f : grad_up[i]) + grad_out[i] * gate[i] * Sigmoid(gate[i]);
    }
  }
  if (grad_gate != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float s = Sigmoid(gate[i]);
      grad_gate[i] = (overwrite ? 0.0f : grad_gate[i]) +
                     grad_out[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    }
  }
}

float Max(const float* x, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  // The ?: form, not std::max: GCC 12 vectorizes only this reduction.
#pragma omp simd reduction(max : best)
  for (int64_t i = 0; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

float ExpShiftedSum(const float* in, float shift, float* out, int64_t n) {
  float sum = 0;
  if (out == nullptr) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += Exp(in[i] - shift);
    return sum;
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    out[i] = Exp(in[i] - shift);
    sum += out[i];
  }
  return sum;
}

void ScaledExpShifted(const float* in, float shift, float scale, float* out,
                      bool accumulate, int64_t n) {
  if (accumulate) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] += Exp(in[i] - shift) * scale;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = Exp(in[i] - shift) * scale;
  }
}

void ExpMinus(const float* in, const float* shift, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = Exp(in[i] - shift[i]);
}

const char* VectorMathName() { return "scalar"; }

}  // namespace smallem::cpu

#endif  // SMALLEM_HAVE_HWY
