// √x written so that loops calling it vectorize (AdamW's update).
#ifndef SMALLEM_ENGINE_CPU_SQRT_H_
#define SMALLEM_ENGINE_CPU_SQRT_H_

#include <bit>
#include <cstdint>

namespace smallem::cpu {

// √x for x ≥ 0, within an ulp: a bit-level first guess and three Newton
// steps. std::sqrt does not vectorize without -fno-math-errno (its errno
// branch is control flow the vectorizer rejects).
inline float Sqrt(float x) {
  float y = std::bit_cast<float>(0x1fbd1df5 + (std::bit_cast<int32_t>(x) >> 1));
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  return x > 0.0f ? y : 0.0f;
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_SQRT_H_
