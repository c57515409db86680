// RMSNorm over the last dimension: out = x·rstd·gain, rstd = 1/√(mean(x²)+eps),
// optionally of sum = x + residual (the fused residual add).
// Backward, with x̂ = x·rstd and dx̂ = grad_out·gain:
//   grad_x += rstd·(dx̂ − x̂·mean(dx̂·x̂)),  grad_gain += Σ_n grad_out·x̂.
// One warp per row; the gain gradient's column sums go through per-warp
// partial rows in scratch and a second pass that adds them in order
// (deterministic, no atomics). x, residual, sum, out and the gradients of x
// and out f32 or bf16 (kernels/activation_path.cuh); gain, rstd and the gain
// gradient f32.
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"
#include "kernels/norm_common.cuh"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarpSize;
// Rows handled by one warp in the backward (one partial row each).
constexpr int kRowsPerWarp = 8;

__host__ __device__ int64_t PartialRows(int64_t rows) {
  return (rows + kRowsPerWarp - 1) / kRowsPerWarp;
}

// x, out: (rows, cols); gain: (cols); rstd: (rows), may be null. With
// residual (rows, cols) non-null the row normalized is sum = x + residual,
// written to sum (rows, cols) on the first pass (norm_common.cuh) and read
// back by the second, each lane its own elements.
template <bool kMixed>
__global__ void RmsNormForwardKernel(ActIn x, ActIn residual, const float* gain,
                                     ActOut sum, ActOut out, float* rstd_out,
                                     int64_t rows, int64_t cols, float eps) {
  const int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int64_t start = row * cols;
  const float squares = NormFirstPass<kMixed>(x, residual, sum, row, cols, lane,
                                              [](float v) { return v * v; });
  const ActIn input = NormInput(x, residual, sum);
  const float rstd =
      1.0f / sqrtf(WarpSum(squares) * (1.0f / static_cast<float>(cols)) + eps);
  for (int64_t c = lane; c < cols; c += kWarpSize) {
    StoreAct<kMixed>(out, start + c, LoadAct<kMixed>(input, start + c) * rstd * gain[c]);
  }
  if (lane == 0 && rstd_out != nullptr) rstd_out[row] = rstd;
}

// Warp `group` owns rows [group·kRowsPerWarp, +kRowsPerWarp): it adds their
// grad_x and writes their column sums of grad_out·x̂ to row `group` of
// partial_gain (PartialRows(rows), cols). grad_x and partial_gain may be null.
template <bool kMixed>
__global__ void RmsNormBackwardKernel(ActIn x, const float* gain,
                                      const float* rstd, ActIn grad_out,
                                      ActOut grad_x, float* partial_gain,
                                      int64_t rows, int64_t cols) {
  const int64_t group = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (group >= PartialRows(rows)) return;
  const int64_t first = group * kRowsPerWarp;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  // mean(dx̂·x̂) of each of the warp's rows, with rstd factored out of the sum.
  float rs[kRowsPerWarp], mean_dxhat_xhat[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = first + i;
    rs[i] = 0.0f;
    mean_dxhat_xhat[i] = 0.0f;
    if (row >= rows) continue;  // warp-uniform
    rs[i] = rstd[row];
    if (grad_x.data == nullptr) continue;
    const int64_t start = row * cols;
    float sum = 0.0f;
    for (int64_t c = lane; c < cols; c += kWarpSize) {
      sum += LoadAct<kMixed>(grad_out, start + c) * gain[c] * LoadAct<kMixed>(x, start + c);
    }
    mean_dxhat_xhat[i] = WarpSum(sum) * rs[i] * inv_cols;
  }

  for (int64_t c = lane; c < cols; c += kWarpSize) {
    const float gain_c = gain[c];
    float dgain = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int64_t row = first + i;
      if (row >= rows) break;
      const float g = LoadAct<kMixed>(grad_out, row * cols + c);
      const float x_c = LoadAct<kMixed>(x, row * cols + c);
      if (grad_x.data != nullptr) {
        AccumulateAct<kMixed>(grad_x, row * cols + c,
                              rs[i] * (g * gain_c - x_c * rs[i] * mean_dxhat_xhat[i]));
      }
      dgain += g * x_c * rs[i];
    }
    if (partial_gain != nullptr) partial_gain[group * cols + c] = dgain;
  }
}

__global__ void RmsNormBackwardColumnsKernel(const float* partial,
                                             int64_t parts, int64_t cols,
                                             float* dst) {
  AddPartialRows(partial, parts, cols, dst);
}

}  // namespace

cudaError_t LaunchRmsNormForward(ActIn x, ActIn residual, const float* gain,
                                 ActOut sum, ActOut out, float* rstd, int64_t rows,
                                 int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if ((residual.data == nullptr) != (sum.data == nullptr)) return cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto kernel = AnyBf16({x.bf16, residual.bf16, sum.bf16, out.bf16})
                          ? RmsNormForwardKernel<true>
                          : RmsNormForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, blocks, kThreads, 0, stream)(x, residual, gain, sum, out, rstd, rows, cols,
                                          eps);
  return cudaGetLastError();
}

size_t RmsNormBackwardScratchFloats(int64_t rows, int64_t cols) {
  return static_cast<size_t>(PartialRows(rows) * cols);
}

cudaError_t LaunchRmsNormBackward(ActIn x, const float* gain, const float* rstd,
                                  ActIn grad_out, ActOut grad_x, float* grad_gain,
                                  int64_t rows, int64_t cols, float* scratch,
                                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (grad_x.data == nullptr && grad_gain == nullptr) return cudaSuccess;
  const int64_t parts = PartialRows(rows);
  float* partial_gain = grad_gain != nullptr ? scratch : nullptr;
  const auto blocks = static_cast<unsigned>((parts + kWarps - 1) / kWarps);
  const auto kernel = AnyBf16({x.bf16, grad_out.bf16, grad_x.bf16})
                          ? RmsNormBackwardKernel<true>
                          : RmsNormBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, blocks, kThreads, 0, stream)(x, gain, rstd, grad_out, grad_x, partial_gain,
                                          rows, cols);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (grad_gain != nullptr) {
    const auto column_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
    SMALLEM_LAUNCH(RmsNormBackwardColumnsKernel, column_blocks, kThreads, 0, stream)(
        partial_gain, parts, cols, grad_gain);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
