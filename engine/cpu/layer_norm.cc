// LayerNorm over the last dimension: out = (x − mean)·rstd·gain + bias,
// optionally of sum = x + residual (the fused residual add, NormParams).
// Backward (norm_backward.h), with x̂ = (x − mean)·rstd and dx̂ = grad_out·gain:
//   grad_x += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)),
//   grad_gain += Σ_n grad_out·x̂,  grad_bias += Σ_n grad_out.
#include <cmath>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/norm_backward.h"
#include "engine/cpu/norm_residual.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::LayerNormForward(const NormParams& p) {
  if (cpu::MaybeSplitBf16Sum(*this, p, &CpuBackend::LayerNormForward) ||
      cpu::MaybeRunWidened(*this, p, &CpuBackend::LayerNormForward)) {
    return;
  }
  CheckNorm(p, NormKind::kLayer);
  const int64_t cols = p.gain.numel();
  const int64_t rows = p.x.shape.rows();
  const float* x = p.x.f32();
  const float* residual = p.residual.empty() ? nullptr : p.residual.f32();
  float* sum_out = p.sum.empty() ? nullptr : p.sum.f32();
  const float* gain = p.gain.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  float* out = p.out.f32();
  float* mean_out = p.mean.empty() ? nullptr : p.mean.f32();
  float* rstd_out = p.rstd.empty() ? nullptr : p.rstd.f32();
  const float inv_cols = 1.0f / static_cast<float>(cols);
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = cpu::NormInputRow(x, residual, sum_out, r, cols);
    float* out_row = out + r * cols;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += x_row[c];
    const float mean = sum * inv_cols;
    // Two passes: the variance of centered values does not cancel.
    float squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t c = 0; c < cols; ++c) {
      const float d = x_row[c] - mean;
      squares += d * d;
    }
    const float rstd = 1.0f / std::sqrt(squares * inv_cols + p.eps);
    if (bias != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        out_row[c] = (x_row[c] - mean) * rstd * gain[c] + bias[c];
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        out_row[c] = (x_row[c] - mean) * rstd * gain[c];
      }
    }
    if (mean_out != nullptr) mean_out[r] = mean;
    if (rstd_out != nullptr) rstd_out[r] = rstd;
  }
}

void CpuBackend::LayerNormBackward(const NormBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::LayerNormBackward)) return;
  cpu::NormBackward(p, NormKind::kLayer, threads_);
}

}  // namespace smallem
