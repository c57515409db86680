// e^x written so that loops calling it vectorize (the fallback of
// vector_math.h where the build has no Highway), and the sigmoid built on it.
#ifndef SMALLEM_ENGINE_CPU_EXP_H_
#define SMALLEM_ENGINE_CPU_EXP_H_

#include <algorithm>
#include <bit>
#include <cstdint>

namespace smallem::cpu {

// e^x to about 2 ulp (Cephes' expf polynomial), written with plain float and
// integer arithmetic so that loops calling it vectorize: std::exp and even
// std::floor do not without -ffast-math. Underflows to 0 below −87.
inline float Exp(float x) {
  const float clamped = std::min(std::max(x, -87.0f), 88.0f);
  // Adding 1.5·2^23 rounds x·log2(e) to the nearest integer n, which then
  // sits in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kRound;
  const float n = shifted - kRound;
  const int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  // x − n·ln2 in two steps so the reduction stays exact.
  float r = clamped - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float result = p * std::bit_cast<float>((n_int + 127) << 23);
  return x < -87.0f ? 0.0f : result;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_EXP_H_
