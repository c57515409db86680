// RMSNorm over the last dimension: out = x·rstd·gain, rstd = 1/√(mean(x²)+eps).
// Backward, with x̂ = x·rstd and dx̂ = grad_out·gain:
//   grad_x += rstd·(dx̂ − x̂·mean(dx̂·x̂)),  grad_gain += Σ_n grad_out·x̂.
#include <omp.h>

#include <cmath>

#include "engine/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"

namespace smallem {

void CpuBackend::RmsNormForward(const NormParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "rms_norm: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  cpu::CheckF32(p.x, rows * cols, "rms_norm: x");
  cpu::CheckF32(p.gain, cols, "rms_norm: gain");
  cpu::CheckF32(p.out, rows * cols, "rms_norm: out");
  if (!p.rstd.empty()) cpu::CheckF32(p.rstd, rows, "rms_norm: rstd");
  const float* x = p.x.f32();
  const float* gain = p.gain.f32();
  float* out = p.out.f32();
  float* rstd_out = p.rstd.empty() ? nullptr : p.rstd.f32();
  const float inv_cols = 1.0f / static_cast<float>(cols);
#pragma omp parallel for num_threads(threads_) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * cols;
    float* out_row = out + r * cols;
    float squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t c = 0; c < cols; ++c) squares += x_row[c] * x_row[c];
    const float rstd = 1.0f / std::sqrt(squares * inv_cols + p.eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out_row[c] = x_row[c] * rstd * gain[c];
    if (rstd_out != nullptr) rstd_out[r] = rstd;
  }
}

void CpuBackend::RmsNormBackward(const NormBackwardParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols)
      << "rms_norm backward: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  cpu::CheckF32(p.x, rows * cols, "rms_norm backward: x");
  cpu::CheckF32(p.gain, cols, "rms_norm backward: gain");
  cpu::CheckF32(p.rstd, rows, "rms_norm backward: rstd");
  cpu::CheckF32(p.grad_out, rows * cols, "rms_norm backward: grad_out");
  const float* x = p.x.f32();
  const float* gain = p.gain.f32();
  const float* rstd = p.rstd.f32();
  const float* g = p.grad_out.f32();
  const bool parallel = rows * cols >= cpu::kParallelMin;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  if (!p.grad_x.empty()) {
    cpu::CheckF32(p.grad_x, rows * cols, "rms_norm backward: grad_x");
    float* grad_x = p.grad_x.f32();
#pragma omp parallel for num_threads(threads_) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_row = x + r * cols;
      const float* g_row = g + r * cols;
      float* gx_row = grad_x + r * cols;
      const float rs = rstd[r];
      float sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat_xhat)
      for (int64_t c = 0; c < cols; ++c) {
        sum_dxhat_xhat += g_row[c] * gain[c] * x_row[c];
      }
      // mean(dx̂·x̂) with the row's rstd factored out of the sum.
      const float mean_dxhat_xhat = sum_dxhat_xhat * rs * inv_cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        gx_row[c] += rs * (g_row[c] * gain[c] - x_row[c] * rs * mean_dxhat_xhat);
      }
    }
  }

  if (p.grad_gain.empty()) return;
  cpu::CheckF32(p.grad_gain, cols, "rms_norm backward: grad_gain");
  float* grad_gain = p.grad_gain.f32();
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
      const float rs = rstd[r];
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) grad_gain[c] += g_row[c] * x_row[c] * rs;
    }
  }
}

}  // namespace smallem
