// Row-broadcast bias: x[n, :] += bias, and its gradient Σ_n grad_out[n, :].
// The gradient is a column sum made deterministic in two passes: each warp
// sums a fixed group of rows into a partial row of scratch, then one thread
// per column adds the partial rows in order. x and grad_out f32 or bf16
// (kernels/activation_path.cuh); bias and its gradient f32.
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// Rows summed by one warp into one partial row.
constexpr int64_t kRowsPerWarp = 16;

__host__ __device__ int64_t PartialRows(int64_t rows) {
  return (rows + kRowsPerWarp - 1) / kRowsPerWarp;
}

// x: (rows, cols) += bias (cols).
template <bool kMixed>
__global__ void BiasAddForwardKernel(ActOut x, const float* bias, int64_t rows,
                                     int64_t cols) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    AccumulateAct<kMixed>(x, i, bias[i % cols]);
  }
}

// partial: (PartialRows(rows), cols); warp `group` sums rows
// [group·kRowsPerWarp, +kRowsPerWarp) of grad_out (rows, cols) in order.
template <bool kMixed>
__global__ void BiasBackwardPartialKernel(ActIn grad_out, int64_t rows,
                                          int64_t cols, float* partial) {
  const int64_t group = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (group >= PartialRows(rows)) return;
  const int64_t first = group * kRowsPerWarp;
  const int64_t last = min(rows, first + kRowsPerWarp);
  for (int64_t c = lane; c < cols; c += kWarpSize) {
    float sum = 0.0f;
    for (int64_t r = first; r < last; ++r) sum += LoadAct<kMixed>(grad_out, r * cols + c);
    partial[group * cols + c] = sum;
  }
}

// grad_bias (cols) += Σ partial rows.
__global__ void BiasBackwardFinalKernel(const float* partial, int64_t parts,
                                        int64_t cols, float* grad_bias) {
  AddPartialRows(partial, parts, cols, grad_bias);
}

}  // namespace

cudaError_t LaunchBiasAddForward(ActOut x, const float* bias, int64_t rows,
                                 int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const auto kernel = x.bf16 ? BiasAddForwardKernel<true> : BiasAddForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(rows * cols, kThreads), kThreads, 0, stream)(x, bias, rows,
                                                                           cols);
  return cudaGetLastError();
}

size_t BiasBackwardScratchFloats(int64_t rows, int64_t cols) {
  return static_cast<size_t>(PartialRows(rows) * cols);
}

cudaError_t LaunchBiasAddBackward(ActIn grad_out, float* grad_bias,
                                  int64_t rows, int64_t cols, float* scratch,
                                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || grad_bias == nullptr) return cudaSuccess;
  const int64_t parts = PartialRows(rows);
  const auto blocks = static_cast<unsigned>((parts + kWarps - 1) / kWarps);
  const auto partial_kernel =
      grad_out.bf16 ? BiasBackwardPartialKernel<true> : BiasBackwardPartialKernel<false>;
  SMALLEM_LAUNCH(partial_kernel, blocks, kThreads, 0, stream)(grad_out, rows, cols, scratch);
  const auto column_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  SMALLEM_LAUNCH(BiasBackwardFinalKernel, column_blocks, kThreads, 0, stream)(
      scratch, parts, cols, grad_bias);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
