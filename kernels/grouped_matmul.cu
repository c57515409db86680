// Grouped product (engine/cpu/grouped_matmul.cc is the reference): rows
// [offsets[g], offsets[g + 1]) of x times weight[g]ᵀ, the offsets read on
// the device so a step stays capturable. A plain kernel — one thread per
// output element, sums in a fixed order (deterministic), no tensor cores —
// correct first; a tiled or cuBLASLt grouped version is the next step
// (docs/benchmarks.md has no GPU ratio for it yet).
#include "kernels/activation.cuh"
#include "kernels/device_util.cuh"
#include "kernels/moe_kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// The group of row r: the last g with offsets[g] <= r (binary search).
__device__ int64_t GroupOf(const int32_t* offsets, int64_t groups, int64_t r) {
  int64_t lo = 0, hi = groups - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__global__ void ForwardKernel(ActIn x, const float* weight, const int32_t* offsets,
                              ActOut out, int64_t rows, int64_t groups, int64_t m, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * m;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / m, col = i % m;
    const float* w = weight + (GroupOf(offsets, groups, r) * m + col) * k;
    float sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += Load(x, r * k + p) * w[p];
    Store(out, i, sum);
  }
}

__global__ void BackwardXKernel(ActIn grad_out, const float* weight, const int32_t* offsets,
                                ActOut grad_x, int64_t rows, int64_t groups, int64_t m,
                                int64_t k, bool overwrite) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * k;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / k, col = i % k;
    const float* w = weight + GroupOf(offsets, groups, r) * m * k + col;
    float sum = 0;
    for (int64_t q = 0; q < m; ++q) sum += Load(grad_out, r * m + q) * w[q * k];
    if (overwrite) Store(grad_x, i, sum);
    else Accumulate(grad_x, i, sum);
  }
}

__global__ void BackwardWeightKernel(ActIn grad_out, ActIn x, const int32_t* offsets,
                                     float* grad_weight, int64_t groups, int64_t m, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < groups * m * k;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t g = i / (m * k), row = (i / k) % m, col = i % k;
    float sum = 0;
    for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r) {
      sum += Load(grad_out, r * m + row) * Load(x, r * k + col);
    }
    grad_weight[i] += sum;
  }
}

}  // namespace

cudaError_t LaunchGroupedMatmulForward(ActIn x, const float* weight, const int32_t* offsets,
                                       ActOut out, int64_t rows, int64_t groups, int64_t m,
                                       int64_t k, cudaStream_t stream) {
  if (rows * m <= 0) return cudaSuccess;
  ForwardKernel<<<GridStrideBlocks(rows * m, kThreads), kThreads, 0, stream>>>(
      x, weight, offsets, out, rows, groups, m, k);
  return cudaGetLastError();
}

cudaError_t LaunchGroupedMatmulBackward(ActIn x, const float* weight, const int32_t* offsets,
                                        ActIn grad_out, ActOut grad_x, float* grad_weight,
                                        int64_t rows, int64_t groups, int64_t m, int64_t k,
                                        bool overwrite_x, cudaStream_t stream) {
  if (grad_x.data != nullptr && rows * k > 0) {
    BackwardXKernel<<<GridStrideBlocks(rows * k, kThreads), kThreads, 0, stream>>>(
        grad_out, weight, offsets, grad_x, rows, groups, m, k, overwrite_x);
  }
  if (grad_weight != nullptr && groups * m * k > 0) {
    BackwardWeightKernel<<<GridStrideBlocks(groups * m * k, kThreads), kThreads, 0, stream>>>(
        grad_out, x, offsets, grad_weight, groups, m, k);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
