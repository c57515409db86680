// The backward pass that LayerNorm and RMSNorm share (layer_norm.cc,
// rms_norm.cc). They differ only in centering: with x̂ = (x − mean)·rstd
// (mean = 0 for RMSNorm) and dx̂ = grad_out·gain,
//   grad_x    += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))   (no mean(dx̂) for RMSNorm),
//   grad_gain += Σ_n grad_out·x̂,  grad_bias += Σ_n grad_out  (LayerNorm only).
// Internal to engine/cpu/.
#ifndef SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_
#define SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/partition.h"
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
  // One pass over x and grad_out. The parameters' gradients are summed per
  // block of kRowBlock rows into `partial`, then the blocks in order: the
  // result depends on neither the thread count nor the scheduling.
  constexpr int64_t kRowBlock = 32;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const bool params = grad_gain != nullptr || grad_bias != nullptr;
  std::vector<float> partial(params ? static_cast<size_t>(2 * blocks * cols) : 0);

#pragma omp parallel for num_threads(threads) schedule(static) if (parallel)
  for (int64_t block = 0; block < blocks; ++block) {
    float* gain_sum = params ? partial.data() + 2 * block * cols : nullptr;
    float* bias_sum = params ? gain_sum + cols : nullptr;
    const int64_t end = std::min(rows, (block + 1) * kRowBlock);
    for (int64_t r = block * kRowBlock; r < end; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      const float rs = rstd[r];
      const float mu = centered ? mean[r] : 0.0f;
      if (grad_x != nullptr) {
        float* gx_row = grad_x + r * cols;
        // Each keeps its own arithmetic: LayerNorm's expressions with
        // mean = 0 are RMSNorm's in exact arithmetic, but round (and fuse
        // multiply-adds) differently.
        if (centered) {
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
      // The row is still in L1: its share of the parameters' gradients.
      if (grad_gain != nullptr) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) gain_sum[c] += g_row[c] * (x_row[c] - mu) * rs;
      }
      if (grad_bias != nullptr) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) bias_sum[c] += g_row[c];
      }
    }
  }

  for (int64_t c = 0; c < cols && params; ++c) {
    float gain_total = 0, bias_total = 0;
    for (int64_t block = 0; block < blocks; ++block) {
      gain_total += partial[2 * block * cols + c];
      bias_total += partial[(2 * block + 1) * cols + c];
    }
    if (grad_gain != nullptr) grad_gain[c] += gain_total;
    if (grad_bias != nullptr) grad_bias[c] += bias_total;
  }
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_NORM_BACKWARD_H_
