// Embedding: a row gather, and its gradient, a scatter-add into the table.
// The scatter is deterministic without atomics: one block owns each table
// row, finds the tokens with that id segment by segment (an ordered
// compaction), and adds their gradient rows in token order.
#include <cstdio>

#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// Ids each thread tests per segment; a segment is kThreads·kIdsPerThread ids.
constexpr int kIdsPerThread = 4;
constexpr int kSegment = kThreads * kIdsPerThread;

// ids: (count) i32; table: (vocab, cols); out: (count, cols).
__global__ void EmbeddingForwardKernel(const int32_t* ids, const float* table,
                                       float* out, int64_t count,
                                       int64_t vocab, int64_t cols) {
  const int64_t total = count * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / cols, c = i % cols;
    const int32_t id = ids[n];
    if (id < 0 || id >= vocab) {
      // A broken invariant (the data pipeline makes ids): stop the context
      // loudly rather than read out of bounds.
      printf("embedding: id %d at %lld outside [0, %lld)\n", id,
             static_cast<long long>(n), static_cast<long long>(vocab));
      __trap();
    }
    out[i] = table[id * cols + c];
  }
}

// Exclusive prefix sum of `value` over the block, in thread order; *total
// gets the block's sum. Integer, so exact. warp_totals: kWarps ints of
// shared memory. Every thread of the block must call it.
__device__ int BlockExclusiveScan(int value, int* warp_totals, int* total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < kWarpSize; offset <<= 1) {
    const int up = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == kWarpSize - 1) warp_totals[warp] = inclusive;
  __syncthreads();
  int before = 0, sum = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += warp_totals[w];
    sum += warp_totals[w];
  }
  __syncthreads();  // warp_totals may be rewritten by the next call
  *total = sum;
  return before + inclusive - value;
}

// grad_table (vocab, cols) += Σ_{n: ids[n] = row} grad_out[n, :]; block
// `row` owns table row `row` (grid-stride over rows).
__global__ void EmbeddingBackwardKernel(const int32_t* ids,
                                        const float* grad_out,
                                        float* grad_table, int64_t count,
                                        int64_t vocab, int64_t cols) {
  __shared__ int matches[kSegment];  // token indices relative to the segment
  __shared__ int warp_totals[kWarps];
  for (int64_t row = blockIdx.x; row < vocab; row += gridDim.x) {
    float* dst = grad_table + row * cols;
    for (int64_t begin = 0; begin < count; begin += kSegment) {
      // Thread t tests ids [begin + t·kIdsPerThread, +kIdsPerThread), so
      // thread order then item order is token order.
      const int64_t mine = begin + int64_t{threadIdx.x} * kIdsPerThread;
      bool hit[kIdsPerThread];
      int hits = 0;
#pragma unroll
      for (int k = 0; k < kIdsPerThread; ++k) {
        hit[k] = mine + k < count && ids[mine + k] == row;
        hits += hit[k];
      }
      int found = 0;
      int slot = BlockExclusiveScan(hits, warp_totals, &found);
#pragma unroll
      for (int k = 0; k < kIdsPerThread; ++k) {
        if (hit[k]) matches[slot++] = static_cast<int>(threadIdx.x) * kIdsPerThread + k;
      }
      __syncthreads();
      if (found > 0) {  // block-uniform
        for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
          float sum = 0.0f;
          for (int j = 0; j < found; ++j) sum += grad_out[(begin + matches[j]) * cols + c];
          dst[c] += sum;
        }
      }
      __syncthreads();  // matches is rewritten by the next segment
    }
  }
}

}  // namespace

cudaError_t LaunchEmbeddingForward(const int32_t* ids, const float* table,
                                   float* out, int64_t count, int64_t vocab,
                                   int64_t cols, cudaStream_t stream) {
  if (count <= 0 || cols <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(EmbeddingForwardKernel, GridStrideBlocks(count * cols, kThreads), kThreads, 0, stream)(ids, table, out, count, vocab, cols);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(const int32_t* ids, const float* grad_out,
                                    float* grad_table, int64_t count,
                                    int64_t vocab, int64_t cols,
                                    cudaStream_t stream) {
  if (count <= 0 || cols <= 0 || vocab <= 0 || grad_table == nullptr) return cudaSuccess;
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  const auto blocks = static_cast<unsigned>(std::min(vocab, kMaxBlocks));
  SMALLEM_LAUNCH(EmbeddingBackwardKernel, blocks, kThreads, 0, stream)(
      ids, grad_out, grad_table, count, vocab, cols);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
