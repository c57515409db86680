// bf16 on the host: the engine's activation storage format in the speed mode
// (engine/backend.h, "Activations"). A bf16 is the top 16 bits of an f32;
// rounding is to nearest, ties to even, as the GPU's __float2bfloat16 does,
// and a NaN stays a NaN.
#ifndef SMALLEM_ENGINE_BF16_H_
#define SMALLEM_ENGINE_BF16_H_

#include <bit>
#include <cstdint>

namespace smallem {

inline uint16_t FloatToBf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float Bf16ToFloat(uint16_t x) { return std::bit_cast<float>(uint32_t{x} << 16); }

// x rounded to the nearest bf16, as an f32.
inline float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

}  // namespace smallem

#endif  // SMALLEM_ENGINE_BF16_H_
