// The model's math on one token's vectors in host memory, for generation
// (Generator, LatentCache, the MoE layer's host path): each function computes
// what its training op computes, in f32, sums in index order.
#ifndef SMALLEM_ENGINE_MODEL_HOST_MATH_H_
#define SMALLEM_ENGINE_MODEL_HOST_MATH_H_

#include <cmath>
#include <cstdint>

namespace smallem::host {

// out (rows) = W (rows, cols) · x (cols) [+ bias].
inline void MatVec(const float* w, const float* x, int64_t rows, int64_t cols, float* out,
                   const float* bias = nullptr) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += row[c] * x[c];
    out[r] = bias != nullptr ? acc + bias[r] : acc;
  }
}

// GELU, the tanh approximation training uses.
inline float GeluTanh(float x) {
  constexpr float k = 0.7978845608f;  // √(2/π)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

// up ← up · silu(gate), SwiGLU's product.
inline void SwiGluInPlace(float* up, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) up[i] *= gate[i] / (1.0f + std::exp(-gate[i]));
}

// Rotates `heads` consecutive heads of `dim` channels at `position`, as the
// Rope op with tables of θ = m·10000^(−2i/dim).
inline void RotateHeads(float* x, int64_t heads, int64_t dim, int64_t position) {
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double angle = position * std::pow(10000.0, -2.0 * static_cast<double>(i) / dim);
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * dim;
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c - b * s;
      v[2 * i + 1] = a * s + b * c;
    }
  }
}

}  // namespace smallem::host

#endif  // SMALLEM_ENGINE_MODEL_HOST_MATH_H_
