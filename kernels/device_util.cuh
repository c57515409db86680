// Device helpers shared by the kernels of kernels/*.cu: warp reductions and
// launch-geometry arithmetic. Nothing here launches anything.
#ifndef SMALLEM_KERNELS_DEVICE_UTIL_CUH_
#define SMALLEM_KERNELS_DEVICE_UTIL_CUH_

#include <cuda_runtime.h>

#include "kernels/launch.cuh"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace smallem::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarpSize = 32;

// Butterfly reductions: every lane ends with the same, bitwise identical
// value (each step adds the same two operands on both lanes of a pair), so
// the result does not depend on which lane reads it.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// Second pass of the deterministic column sums (bias and norm gradients):
// dst[c] += Σ_p partial[p, c] for p in [0, parts), in order of p. partial is
// (parts, cols); one thread per column, so loads are coalesced across the
// warp. Call with a 1-D grid covering cols.
__device__ __forceinline__ void AddPartialRows(const float* partial,
                                               int64_t parts, int64_t cols,
                                               float* dst) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  float total = 0.0f;
  for (int64_t p = 0; p < parts; ++p) total += partial[p * cols + c];
  dst[c] += total;
}

// Opts `kernel` in to `bytes` of dynamic shared memory when that is above
// the default 48 KiB. The attribute persists (per device), so it is set once
// per kernel and size, not at every launch: a captured step (CUDA graphs)
// then makes no such call.
inline cudaError_t AllowDynamicSmem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> granted;
  std::lock_guard<std::mutex> lock(mu);
  size_t& have = granted[{device, kernel}];
  if (bytes <= have) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e == cudaSuccess) have = bytes;
  return e;
}

// Blocks for a grid-stride loop over `count` items, `threads` per block.
// Capped: beyond a few waves more blocks only add scheduling overhead.
inline unsigned GridStrideBlocks(int64_t count, int threads) {
  constexpr int64_t kMaxBlocks = 132 * 32;
  const int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_DEVICE_UTIL_CUH_
