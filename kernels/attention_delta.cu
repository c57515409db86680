// delta = rowsum(grad_out ∘ out) per (batch, head, time): the first step of
// both attention backwards (kernels/attention.cu, kernels/attention_bf16.cu),
// declared in kernels/attention_common.cuh.
#include "kernels/activation.cuh"
#include "kernels/attention_common.cuh"
#include "kernels/device_util.cuh"

namespace smallem::cuda {
namespace {

// out, grad_out: (B, T, C); delta: (B, H, T). One warp per row
// (b·T + t)·H + h, the order of (B, T, C) memory, grid-stride; lane d adds
// channels d, d + 32, … of its head with fmaf, then the warp sums.
template <int D>
__global__ void AttentionDeltaKernel(ActIn out, ActIn grad_out, float* delta, int time,
                                     int heads, int64_t rows) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  for (int64_t row = blockIdx.x * int64_t{blockDim.x / kWarpSize} + threadIdx.x / kWarpSize;
       row < rows; row += warps) {
    const int h = static_cast<int>(row % heads);
    const int64_t bt = row / heads;
    const int b = static_cast<int>(bt / time), t = static_cast<int>(bt % time);
    // Head h of row bt starts at bt·C + h·D = row·D.
    const int64_t offset = row * D;
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < D / kWarpSize; ++c) {
      const int d = lane + c * kWarpSize;
      sum = fmaf(Load(grad_out, offset + d), Load(out, offset + d), sum);
    }
    sum = WarpSum(sum);
    if (lane == 0) delta[(static_cast<int64_t>(b) * heads + h) * time + t] = sum;
  }
}

template <int D>
cudaError_t Delta(ActIn out, ActIn grad_out, float* delta, const AttentionShape& s,
                  cudaStream_t stream) {
  const int64_t rows = s.batch * s.time * s.heads;
  constexpr int kThreads = 256;
  SMALLEM_LAUNCH(AttentionDeltaKernel<D>, GridStrideBlocks(rows * kWarpSize, kThreads), kThreads, 0, stream)(
      out, grad_out, delta, static_cast<int>(s.time), static_cast<int>(s.heads), rows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAttentionDelta(ActIn out, ActIn grad_out, float* delta,
                                 const AttentionShape& shape, cudaStream_t stream) {
  return WithHeadDim(shape.head_dim, [&](auto d) {
    return Delta<decltype(d)::value>(out, grad_out, delta, shape, stream);
  });
}

}  // namespace smallem::cuda
