// LayerNorm over the last dimension: out = (x − mean)·rstd·gain + bias,
// optionally of sum = x + residual (the fused residual add).
// Backward, with x̂ = (x − mean)·rstd and dx̂ = grad_out·gain:
//   grad_x += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)),
//   grad_gain += Σ_n grad_out·x̂,  grad_bias += Σ_n grad_out.
// One warp per row; the column sums of the gain and bias gradients go
// through per-warp partial rows in scratch and a second pass that adds them
// in order (deterministic, no atomics). x, residual, sum, out and the
// gradients of x and out f32 or bf16 (kernels/activation_path.cuh); gain,
// bias, mean, rstd and their gradients f32.
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

// x, out: (rows, cols); gain, bias: (cols); mean, rstd: (rows). bias, mean,
// rstd may be null. With residual (rows, cols) non-null the row normalized is
// sum = x + residual, written to sum (rows, cols) on the first pass
// (norm_common.cuh); the later passes read it back, each lane its own
// elements.
template <bool kMixed>
__global__ void LayerNormForwardKernel(ActIn x, ActIn residual, const float* gain,
                                       const float* bias, ActOut sum, ActOut out,
                                       float* mean_out, float* rstd_out,
                                       int64_t rows, int64_t cols, float eps) {
  const int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int64_t start = row * cols;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float total = NormFirstPass<kMixed>(x, residual, sum, row, cols, lane,
                                            [](float v) { return v; });
  const ActIn input = NormInput(x, residual, sum);
  const float mean = WarpSum(total) * inv_cols;
  // Two passes: the variance of centered values does not cancel.
  float squares = 0.0f;
  for (int64_t c = lane; c < cols; c += kWarpSize) {
    const float d = LoadAct<kMixed>(input, start + c) - mean;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(WarpSum(squares) * inv_cols + eps);
  for (int64_t c = lane; c < cols; c += kWarpSize) {
    const float y = (LoadAct<kMixed>(input, start + c) - mean) * rstd * gain[c];
    StoreAct<kMixed>(out, start + c, bias != nullptr ? y + bias[c] : y);
  }
  if (lane == 0) {
    if (mean_out != nullptr) mean_out[row] = mean;
    if (rstd_out != nullptr) rstd_out[row] = rstd;
  }
}

// Warp `group` owns rows [group·kRowsPerWarp, +kRowsPerWarp): it adds their
// grad_x and writes their column sums of grad_out·x̂ and grad_out to row
// `group` of partial_gain and partial_bias (PartialRows(rows), cols).
template <bool kMixed>
__global__ void LayerNormBackwardKernel(ActIn x, const float* gain,
                                        const float* mean, const float* rstd,
                                        ActIn grad_out, ActOut grad_x,
                                        float* partial_gain,
                                        float* partial_bias, int64_t rows,
                                        int64_t cols) {
  const int64_t group = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (group >= PartialRows(rows)) return;
  const int64_t first = group * kRowsPerWarp;
  const float inv_cols = 1.0f / static_cast<float>(cols);

  // Row statistics: mean(dx̂) and mean(dx̂·x̂) of each of the warp's rows.
  float mu[kRowsPerWarp], rs[kRowsPerWarp];
  float mean_dxhat[kRowsPerWarp], mean_dxhat_xhat[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = first + i;
    mu[i] = 0.0f;
    rs[i] = 0.0f;
    mean_dxhat[i] = 0.0f;
    mean_dxhat_xhat[i] = 0.0f;
    if (row >= rows) continue;  // warp-uniform
    mu[i] = mean[row];
    rs[i] = rstd[row];
    const int64_t start = row * cols;
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
    for (int64_t c = lane; c < cols; c += kWarpSize) {
      const float dxhat = LoadAct<kMixed>(grad_out, start + c) * gain[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * (LoadAct<kMixed>(x, start + c) - mu[i]) * rs[i];
    }
    mean_dxhat[i] = WarpSum(sum_dxhat) * inv_cols;
    mean_dxhat_xhat[i] = WarpSum(sum_dxhat_xhat) * inv_cols;
  }

  for (int64_t c = lane; c < cols; c += kWarpSize) {
    const float gain_c = gain[c];
    float dgain = 0.0f, dbias = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int64_t row = first + i;
      if (row >= rows) break;
      const float g = LoadAct<kMixed>(grad_out, row * cols + c);
      const float xhat = (LoadAct<kMixed>(x, row * cols + c) - mu[i]) * rs[i];
      if (grad_x.data != nullptr) {
        AccumulateAct<kMixed>(
            grad_x, row * cols + c,
            rs[i] * (g * gain_c - mean_dxhat[i] - xhat * mean_dxhat_xhat[i]));
      }
      dgain += g * xhat;
      dbias += g;
    }
    if (partial_gain != nullptr) partial_gain[group * cols + c] = dgain;
    if (partial_bias != nullptr) partial_bias[group * cols + c] = dbias;
  }
}

__global__ void LayerNormBackwardColumnsKernel(const float* partial,
                                            int64_t parts, int64_t cols,
                                            float* dst) {
  AddPartialRows(partial, parts, cols, dst);
}

}  // namespace

cudaError_t LaunchLayerNormForward(ActIn x, ActIn residual, const float* gain,
                                   const float* bias, ActOut sum, ActOut out,
                                   float* mean, float* rstd, int64_t rows,
                                   int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if ((residual.data == nullptr) != (sum.data == nullptr)) return cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto kernel = AnyBf16({x.bf16, residual.bf16, sum.bf16, out.bf16})
                          ? LayerNormForwardKernel<true>
                          : LayerNormForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, blocks, kThreads, 0, stream)(x, residual, gain, bias, sum, out, mean, rstd,
                                          rows, cols, eps);
  return cudaGetLastError();
}

size_t LayerNormBackwardScratchFloats(int64_t rows, int64_t cols) {
  // A partial row per warp for the gain and one for the bias.
  return static_cast<size_t>(2 * PartialRows(rows) * cols);
}

cudaError_t LaunchLayerNormBackward(ActIn x, const float* gain,
                                    const float* mean, const float* rstd,
                                    ActIn grad_out, ActOut grad_x,
                                    float* grad_gain, float* grad_bias,
                                    int64_t rows, int64_t cols, float* scratch,
                                    cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (grad_x.data == nullptr && grad_gain == nullptr && grad_bias == nullptr) {
    return cudaSuccess;
  }
  const int64_t parts = PartialRows(rows);
  float* partial_gain = grad_gain != nullptr ? scratch : nullptr;
  float* partial_bias = grad_bias != nullptr ? scratch + parts * cols : nullptr;
  const auto blocks = static_cast<unsigned>((parts + kWarps - 1) / kWarps);
  const auto kernel = AnyBf16({x.bf16, grad_out.bf16, grad_x.bf16})
                          ? LayerNormBackwardKernel<true>
                          : LayerNormBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, blocks, kThreads, 0, stream)(x, gain, mean, rstd, grad_out, grad_x,
                                          partial_gain, partial_bias, rows, cols);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const auto column_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  if (grad_gain != nullptr) {
    SMALLEM_LAUNCH(LayerNormBackwardColumnsKernel, column_blocks, kThreads, 0, stream)(
        partial_gain, parts, cols, grad_gain);
  }
  if (grad_bias != nullptr) {
    SMALLEM_LAUNCH(LayerNormBackwardColumnsKernel, column_blocks, kThreads, 0, stream)(
        partial_bias, parts, cols, grad_bias);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
