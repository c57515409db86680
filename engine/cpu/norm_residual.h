// The residual add fused into the norms' forward (layer_norm.cc,
// rms_norm.cc; NormParams::residual and ::sum). Internal to engine/cpu/.
#ifndef SMALLEM_ENGINE_CPU_NORM_RESIDUAL_H_
#define SMALLEM_ENGINE_CPU_NORM_RESIDUAL_H_

#include <cstdint>

namespace smallem::cpu {

// Row r of the norm's input: x's row, or, with a residual, the row of
// sum = x + residual, written to `sum` and returned (still in cache for the
// norm). The add is the one Add computes, so the fused op matches Add then
// the norm bit for bit. No __restrict: sum may alias x or the residual.
inline const float* NormInputRow(const float* x, const float* residual, float* sum, int64_t r,
                                 int64_t cols) {
  const float* x_row = x + r * cols;
  if (residual == nullptr) return x_row;
  const float* residual_row = residual + r * cols;
  float* sum_row = sum + r * cols;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) sum_row[c] = x_row[c] + residual_row[c];
  return sum_row;
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_NORM_RESIDUAL_H_
