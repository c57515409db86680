// LayerNorm over the last dimension: out = (x − mean)·rstd·gain + bias.
// Backward, with x̂ = (x − mean)·rstd and dx̂ = grad_out·gain:
//   grad_x += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)),
//   grad_gain += Σ_n grad_out·x̂,  grad_bias += Σ_n grad_out.
#include <omp.h>

#include <cmath>

#include "engine/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"

namespace smallem {

void CpuBackend::LayerNormForward(const NormParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "layer_norm: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  cpu::CheckF32(p.x, rows * cols, "layer_norm: x");
  cpu::CheckF32(p.gain, cols, "layer_norm: gain");
  cpu::CheckF32(p.out, rows * cols, "layer_norm: out");
  if (!p.bias.empty()) cpu::CheckF32(p.bias, cols, "layer_norm: bias");
  if (!p.mean.empty()) cpu::CheckF32(p.mean, rows, "layer_norm: mean");
  if (!p.rstd.empty()) cpu::CheckF32(p.rstd, rows, "layer_norm: rstd");
  const float* x = p.x.f32();
  const float* gain = p.gain.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  float* out = p.out.f32();
  float* mean_out = p.mean.empty() ? nullptr : p.mean.f32();
  float* rstd_out = p.rstd.empty() ? nullptr : p.rstd.f32();
  const float inv_cols = 1.0f / static_cast<float>(cols);
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * cols;
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
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols)
      << "layer_norm backward: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  cpu::CheckF32(p.x, rows * cols, "layer_norm backward: x");
  cpu::CheckF32(p.gain, cols, "layer_norm backward: gain");
  cpu::CheckF32(p.mean, rows, "layer_norm backward: mean");
  cpu::CheckF32(p.rstd, rows, "layer_norm backward: rstd");
  cpu::CheckF32(p.grad_out, rows * cols, "layer_norm backward: grad_out");
  const float* x = p.x.f32();
  const float* gain = p.gain.f32();
  const float* mean = p.mean.f32();
  const float* rstd = p.rstd.f32();
  const float* g = p.grad_out.f32();
  const bool parallel = rows * cols >= cpu::kParallelMin;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  if (!p.grad_x.empty()) {
    cpu::CheckF32(p.grad_x, rows * cols, "layer_norm backward: grad_x");
    float* grad_x = p.grad_x.f32();
#pragma omp parallel for num_threads(threads_) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      float* gx_row = grad_x + r * cols;
      const float mu = mean[r], rs = rstd[r];
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
    }
  }

  float* grad_gain = nullptr;
  float* grad_bias = nullptr;
  if (!p.grad_gain.empty()) {
    cpu::CheckF32(p.grad_gain, cols, "layer_norm backward: grad_gain");
    grad_gain = p.grad_gain.f32();
  }
  if (!p.grad_bias.empty()) {
    cpu::CheckF32(p.grad_bias, cols, "layer_norm backward: grad_bias");
    grad_bias = p.grad_bias.f32();
  }
  if (grad_gain == nullptr && grad_bias == nullptr) return;
  // Each thread owns a slice of channels and sums rows in order: the result
  // does not depend on the thread count or scheduling.
#pragma omp parallel num_threads(threads_) if (parallel)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = cpu::PartBegin(cols, part, parts);
    const int64_t end = cpu::PartBegin(cols, part + 1, parts);
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      const float mu = mean[r], rs = rstd[r];
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

}  // namespace smallem
