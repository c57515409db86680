// Per-row scaling (optimizer normalizations): out[r,:] = a·in[r,:]·
// √numer[r] / √(denom[r] + eps), empty numer/denom counting as 1, with
// a = alpha or alpha·scale[0] (an f32 product).
#include <algorithm>
#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/row_ops.h"
#include "engine/op_checks.h"

namespace smallem {
namespace cpu {

void RowScale(const float* in, int64_t rows, int64_t cols, const float* numer,
              const float* denom, float alpha, float eps, float* out,
              int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * cols >= kParallelMin && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    double factor = alpha;
    if (numer) factor *= std::sqrt(std::max(0.0, static_cast<double>(numer[r])));
    if (denom) {
      const double d = static_cast<double>(denom[r]) + eps;
      // A zero row has a zero statistic: keep it zero rather than 0/0.
      factor = d > 0 ? factor / std::sqrt(d) : 0.0;
    }
    const float f = static_cast<float>(factor);
    const float* src = in + r * cols;
    float* dst = out + r * cols;
#pragma omp simd
    for (int64_t k = 0; k < cols; ++k) dst[k] = src[k] * f;
  }
}

}  // namespace cpu

void CpuBackend::RowScale(const RowScaleParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CheckRowScale(p);
  float alpha = p.alpha;
  if (!p.scale.empty()) alpha *= p.scale.f32()[0];
  cpu::RowScale(p.in.f32(), rows, cols, p.numer.empty() ? nullptr : p.numer.f32(),
                p.denom.empty() ? nullptr : p.denom.f32(), alpha, p.eps, p.out.f32(),
                threads_);
}

}  // namespace smallem
