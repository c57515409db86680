// Code shared by the two attention kernels, kernels/attention.cu (f32) and
// kernels/attention_bf16.cu (tensor cores): both forwards keep an online
// softmax per query row and end it the same way, and both backwards start
// from the same delta (kernels/attention_delta.cu).
#ifndef SMALLEM_KERNELS_ATTENTION_COMMON_CUH_
#define SMALLEM_KERNELS_ATTENTION_COMMON_CUH_

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/activation.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {

// f(std::integral_constant<int, D>{}) for head_dim D, one of
// kAttentionHeadDims: the launchers' one dispatch from a runtime head size
// to their kernels' template. cudaErrorInvalidValue for any other size.
template <typename F>
cudaError_t WithHeadDim(int64_t head_dim, F&& f) {
  switch (head_dim) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
  }
  return cudaErrorInvalidValue;
}

// The end of one query row's online softmax over its visible keys: m is the
// running max of the scores, l the running sum of exp(s − m), and acc(c)
// the c-th of the kCount output channels this thread holds, Σ exp(s − m)·v.
// Writes out[offset + c · stride] = acc(c) / l (as acc · (1/l), rounded
// once when out is bf16) for c < kCount and, when lse is not null and this
// thread is the row's `lse_writer`, lse[lse_index] = m + log l, the row's
// log-sum-exp from which the backward recomputes the probabilities.
template <int kCount, typename Acc>
__device__ __forceinline__ void FinishOnlineSoftmax(float m, float l, Acc acc, ActOut out,
                                                    int64_t offset, int stride, float* lse,
                                                    int64_t lse_index, bool lse_writer) {
  const float inv_l = 1.0f / l;
  for (int c = 0; c < kCount; ++c) Store(out, offset + c * stride, acc(c) * inv_l);
  if (lse != nullptr && lse_writer) lse[lse_index] = m + logf(l);
}

// delta (B, H, T) = rowsum(grad_out ∘ out) per head, in f32, from out and
// grad_out (B, T, C), each f32 or bf16: the backwards' first step. One
// warp per (b, t, h) adds its D products in a fixed order (deterministic).
cudaError_t LaunchAttentionDelta(ActIn out, ActIn grad_out, float* delta,
                                 const AttentionShape& shape, cudaStream_t stream);

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_ATTENTION_COMMON_CUH_
