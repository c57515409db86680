// The backward pass that LayerNorm and RMSNorm share (layer_norm.cc,
// rms_norm.cc). They differ only in centering: with x̂ = (x − mean)·rstd
// (mean = 0 for RMSNorm) and dx̂ = grad_out·gain,
//   grad_x    += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))   (no mean(dx̂) for RMSNorm),
//   grad_gain += Σ_n grad_out·x̂,  grad_bias += Σ_n grad_out  (LayerNorm only).
// Internal to engine/cpu/.
#ifndef SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_
#define SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_

#include <omp.h>

#include <cstdint>

#include "engine/backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

namespace smallem::cpu {

// CHECKs `p` (CheckNormBackward, engine/op_checks.h), then accumulates into
// each gradient `p` holds: grad_x, grad_gain and, for LayerNorm, grad_bias.
// RMSNorm reads neither p.mean nor p.grad_bias. Runs on up to `threads`
// OpenMP threads (on the calling thread alone for small inputs); the result
// does not depend on the thread count.
inline void NormBackward(const NormBackwardParams& p, NormKind kind, int threads) {
  CheckNormBackward(p, kind);
  const bool centered = kind == NormKind::kLayer;
  const int64_t cols = p.gain.numel();
  const int64_t rows = p.x.shape.rows();

  const float* x = p.x.f32();
  const float* mean = centered ? p.mean.f32() : nullptr;
  const float* rstd = p.rstd.f32();
  const float* gain = p.gain.f32();
  const float* g = p.grad_out.f32();
  float* grad_x = p.grad_x.f32();
  float* grad_gain = p.grad_gain.f32();
  float* grad_bias = centered ? p.grad_bias.f32() : nullptr;
  const bool parallel = rows * cols >= kParallelMin;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  if (grad_x != nullptr) {
#pragma omp parallel for num_threads(threads) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      float* gx_row = grad_x + r * cols;
      const float rs = rstd[r];
      // Each keeps its own arithmetic: LayerNorm's expressions with mean = 0
      // are RMSNorm's in exact arithmetic, but round (and fuse multiply-adds)
      // differently.
      if (centered) {
        const float mu = mean[r];
        float sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
        for (int64_t c = 0; c < cols; ++c) {
          const float dxhat = g_row[c] * gain[c];
          sum_dxhat += dxhat;
          sum_dxhat_xhat += dxhat * (x_row[c] - mu) * rs;
        }
        const float mean_dxhat = sum_dxhat * inv_cols;
        const float mean_dxhat_xhat = sum_dxhat_xhat * inv_cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
          const float xhat = (x_row[c] - mu) * rs;
          gx_row[c] += rs * (g_row[c] * gain[c] - mean_dxhat - xhat * mean_dxhat_xhat);
        }
      } else {
        float sum_dxhat_x = 0;
#pragma omp simd reduction(+ : sum_dxhat_x)
        for (int64_t c = 0; c < cols; ++c) sum_dxhat_x += g_row[c] * gain[c] * x_row[c];
        // mean(dx̂·x̂) with the row's rstd factored out of the sum.
        const float mean_dxhat_xhat = sum_dxhat_x * rs * inv_cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
          gx_row[c] += rs * (g_row[c] * gain[c] - x_row[c] * rs * mean_dxhat_xhat);
        }
      }
    }
  }

  if (grad_gain == nullptr && grad_bias == nullptr) return;
  // Each thread owns a slice of channels and sums rows in order: the result
  // does not depend on the thread count or scheduling.
#pragma omp parallel num_threads(threads) if (parallel)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = PartBegin(cols, part, parts);
    const int64_t end = PartBegin(cols, part + 1, parts);
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      const float mu = centered ? mean[r] : 0.0f, rs = rstd[r];
      if (grad_gain != nullptr) {
#pragma omp simd
        for (int64_t c = begin; c < end; ++c) {
          grad_gain[c] += g_row[c] * (x_row[c] - mu) * rs;
        }
      }
      if (grad_bias != nullptr) {
#pragma omp simd
        for (int64_t c = begin; c < end; ++c) grad_bias[c] += g_row[c];
      }
    }
  }
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_
