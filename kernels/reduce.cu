// Sum and sum of squares into a scalar, accumulated in double over a fixed
// two-pass tree: pass one gives each of a shape-determined number of blocks
// a fixed strided set of elements and writes one partial per block; pass two
// adds the partials in a fixed order. Same inputs, same bits.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int64_t kMaxPartials = 1024;
// Elements per thread below which fewer blocks are used.
constexpr int64_t kPerThread = 8;

int64_t PartialCount(int64_t count) {
  const int64_t blocks = (count + kThreads * kPerThread - 1) / (kThreads * kPerThread);
  return std::clamp<int64_t>(blocks, 1, kMaxPartials);
}

// Sum over the block in a fixed tree; the result is valid in thread 0.
// warp_sums: kWarps doubles of shared memory.
__device__ double BlockSum(double value, double* warp_sums) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  value = WarpSum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  double total = 0.0;
  if (warp == 0) {
    total = WarpSum(lane < kWarps ? warp_sums[lane] : 0.0);
  }
  return total;
}

// partial[block] = Σ over elements block·kThreads + t + k·(grid·kThreads).
template <bool kSquares>
__global__ void ReducePartialKernel(const float* in, int64_t count,
                                    double* partial) {
  __shared__ double warp_sums[kWarps];
  double sum = 0.0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * kThreads) {
    const double x = in[i];
    sum += kSquares ? x * x : x;
  }
  const double total = BlockSum(sum, warp_sums);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// out (1) = Σ partial (or out += ), one block.
__global__ void ReduceFinalKernel(const double* partial, int64_t parts,
                                  bool accumulate, float* out) {
  __shared__ double warp_sums[kWarps];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < parts; i += kThreads) sum += partial[i];
  const double total = BlockSum(sum, warp_sums);
  if (threadIdx.x == 0) {
    out[0] = accumulate ? static_cast<float>(out[0] + total) : static_cast<float>(total);
  }
}

}  // namespace

size_t ReduceScratchFloats(int64_t count) {
  // One double per partial.
  return static_cast<size_t>(2 * PartialCount(count));
}

cudaError_t LaunchReduce(const float* in, int64_t count, ReduceKind kind,
                         bool accumulate, float* out, float* scratch,
                         cudaStream_t stream) {
  const int64_t parts = PartialCount(std::max<int64_t>(count, 0));
  auto* partial = reinterpret_cast<double*>(scratch);
  const auto blocks = static_cast<unsigned>(parts);
  // An empty input still runs: its partials are 0, so out = 0 (or out += 0).
  if (kind == ReduceKind::kSumSquares) {
    SMALLEM_LAUNCH(ReducePartialKernel<true>, blocks, kThreads, 0, stream)(in, count, partial);
  } else {
    SMALLEM_LAUNCH(ReducePartialKernel<false>, blocks, kThreads, 0, stream)(in, count, partial);
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  SMALLEM_LAUNCH(ReduceFinalKernel, 1, kThreads, 0, stream)(partial, parts, accumulate, out);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
