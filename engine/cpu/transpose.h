// Transposes of small row-major blocks for the CPU attention kernels
// (engine/cpu/attention.cc, engine/cpu/attention_tiles.cc).
#ifndef SMALLEM_ENGINE_CPU_TRANSPOSE_H_
#define SMALLEM_ENGINE_CPU_TRANSPOSE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace smallem::cpu {

// Eight floats as one value for __builtin_shufflevector: the compiler picks
// the shuffles of whatever vector unit it targets (SSE, AVX2, AVX-512).
typedef float Float8 __attribute__((vector_size(32)));

inline Float8 Load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void Store8(float* p, Float8 v) { std::memcpy(p, &v, sizeof v); }

// The 8 × 8 block at src (row stride ld) written transposed at dst (row
// stride ldd): pairs of rows interleaved, then pairs of pairs, then halves.
inline void Transpose8x8(const float* src, int64_t ld, float* dst, int64_t ldd) {
  Float8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = Load8(src + i * ld);
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int j = 0; j < 2; ++j) {
      u[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * j + 1] =
          __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int i = 0; i < 4; ++i) {
    Store8(dst + i * ldd, __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    Store8(dst + (i + 4) * ldd,
           __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// dst (cols, ldd) = srcᵀ for src (rows, cols) with leading dimension ld,
// ldd ≥ rows: 8 × 8 blocks, then the ragged edges element by element; each
// of dst's rows is zeroed from column `rows` to ldd.
inline void Transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst,
                      int64_t ldd) {
  const int64_t rows8 = rows - rows % 8, cols8 = cols - cols % 8;
  for (int64_t r = 0; r < rows8; r += 8) {
    for (int64_t c = 0; c < cols8; c += 8) {
      Transpose8x8(src + r * ld + c, ld, dst + c * ldd + r, ldd);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = r < rows8 ? cols8 : 0; c < cols; ++c) dst[c * ldd + r] = src[r * ld + c];
  }
  for (int64_t c = 0; c < cols; ++c) std::fill(dst + c * ldd + rows, dst + (c + 1) * ldd, 0.0f);
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_TRANSPOSE_H_
