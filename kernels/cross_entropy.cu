// Softmax cross-entropy per row of logits: losses[n] = lse − logits[target].
// The forward reads each row once with an online softmax (running max and
// sum, merged across threads in a fixed tree); the backward adds (or
// writes) (softmax − onehot(target))·grad_losses[n], recomputing the softmax
// from the saved lse, into an f32 or bf16 gradient. No copy of the logits is
// ever made.
#include <cstdio>

#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// Columns of one backward block.
constexpr int64_t kColumnsPerBlock = 2048;

// A partial softmax: max m and Σ exp(x − m) over some elements.
struct Partial {
  float m, s;
};

// Merges two partials. Symmetric (same bits for (a, b) and (b, a)), and an
// empty partial (−inf, 0) adds nothing.
__device__ __forceinline__ Partial Merge(Partial a, Partial b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return Partial{m, 0.0f};
  const float sa = a.m == -INFINITY ? 0.0f : a.s * expf(a.m - m);
  const float sb = b.m == -INFINITY ? 0.0f : b.s * expf(b.m - m);
  return Partial{m, sa + sb};
}

__device__ __forceinline__ Partial WarpMerge(Partial p) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Partial other{__shfl_xor_sync(kFullMask, p.m, offset),
                        __shfl_xor_sync(kFullMask, p.s, offset)};
    p = Merge(p, other);
  }
  return p;
}

__device__ void TrapBadTarget(int32_t target, int64_t row, int64_t vocab) {
  printf("cross_entropy: target %d at row %lld outside [0, %lld)\n", target,
         static_cast<long long>(row), static_cast<long long>(vocab));
  __trap();
}

// logits: (rows, vocab); targets, losses, lse: (rows). One block per row
// (grid-stride).
__global__ void CrossEntropyForwardKernel(const float* logits,
                                          const int32_t* targets,
                                          float* losses, float* lse,
                                          int64_t rows, int64_t vocab) {
  __shared__ Partial warp_partials[kWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* x = logits + row * vocab;
    Partial p{-INFINITY, 0.0f};
    for (int64_t v = threadIdx.x; v < vocab; v += kThreads) {
      const float value = x[v];
      if (value > p.m) {
        p.s = (p.m == -INFINITY ? 0.0f : p.s * expf(p.m - value)) + 1.0f;
        p.m = value;
      } else if (value != -INFINITY) {  // −inf adds nothing (and −inf − −inf is NaN)
        p.s += expf(value - p.m);
      }
    }
    p = WarpMerge(p);
    if (lane == 0) warp_partials[warp] = p;
    __syncthreads();
    if (warp == 0) {
      Partial q = lane < kWarps ? warp_partials[lane] : Partial{-INFINITY, 0.0f};
      q = WarpMerge(q);
      if (lane == 0) {
        const int32_t target = targets[row];
        if (target < 0 || target >= vocab) TrapBadTarget(target, row, vocab);
        const float row_lse = q.m + logf(q.s);
        losses[row] = row_lse - x[target];
        if (lse != nullptr) lse[row] = row_lse;
      }
    }
    __syncthreads();  // warp_partials is rewritten by the next row
  }
}

// grad_logits (rows, vocab) += (exp(logits − lse) − onehot)·grad_losses, or
// = when overwrite; each thread reads a logit before it writes its
// gradient, so grad_logits may be logits. grid: (rows, column chunks of
// kColumnsPerBlock).
// kMixed: grad_logits may be bf16 (activation_path.cuh).
template <bool kMixed>
__global__ void CrossEntropyBackwardKernel(const float* logits,
                                           const int32_t* targets,
                                           const float* lse,
                                           const float* grad_losses,
                                           ActOut grad_logits, int64_t vocab,
                                           bool overwrite) {
  const int64_t row = blockIdx.x;
  const int64_t begin = blockIdx.y * kColumnsPerBlock;
  const int64_t end = min(vocab, begin + kColumnsPerBlock);
  const float row_lse = lse[row];
  const float g = grad_losses[row];
  const int32_t target = targets[row];
  if (target < 0 || target >= vocab) TrapBadTarget(target, row, vocab);
  const float* x = logits + row * vocab;
  for (int64_t v = begin + threadIdx.x; v < end; v += kThreads) {
    const float softmax = expf(x[v] - row_lse);
    const float d = (v == target ? softmax - 1.0f : softmax) * g;
    if (overwrite) {
      StoreAct<kMixed>(grad_logits, row * vocab + v, d);
    } else {
      AccumulateAct<kMixed>(grad_logits, row * vocab + v, d);
    }
  }
}

}  // namespace

cudaError_t LaunchCrossEntropyForward(const float* logits,
                                      const int32_t* targets, float* losses,
                                      float* lse, int64_t rows, int64_t vocab,
                                      cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab <= 0) return cudaErrorInvalidValue;
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
  SMALLEM_LAUNCH(CrossEntropyForwardKernel, blocks, kThreads, 0, stream)(
      logits, targets, losses, lse, rows, vocab);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyBackward(const float* logits,
                                       const int32_t* targets,
                                       const float* lse,
                                       const float* grad_losses,
                                       ActOut grad_logits, int64_t rows,
                                       int64_t vocab, bool overwrite,
                                       cudaStream_t stream) {
  if (rows <= 0 || grad_logits.data == nullptr) return cudaSuccess;
  const int64_t chunks = (vocab + kColumnsPerBlock - 1) / kColumnsPerBlock;
  if (vocab <= 0 || rows >= (int64_t{1} << 31) || chunks > 65535) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(chunks));
  if (grad_logits.bf16) {
    SMALLEM_LAUNCH(CrossEntropyBackwardKernel<true>, grid, kThreads, 0, stream)(
        logits, targets, lse, grad_losses, grad_logits, vocab, overwrite);
  } else {
    SMALLEM_LAUNCH(CrossEntropyBackwardKernel<false>, grid, kThreads, 0, stream)(
        logits, targets, lse, grad_losses, grad_logits, vocab, overwrite);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
