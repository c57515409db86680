// GELU, tanh approximation: y = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³).
// Operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <bool kMixed>
__global__ void GeluForwardKernel(ActIn in, ActOut out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = LoadAct<kMixed>(in, i);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    StoreAct<kMixed>(out, i, 0.5f * x * (1.0f + tanhf(u)));
  }
}

template <bool kMixed>
__global__ void GeluBackwardKernel(ActIn in, ActIn grad_out, ActOut grad_in,
                                   int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = LoadAct<kMixed>(in, i);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = tanhf(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    AccumulateAct<kMixed>(grad_in, i,
                          LoadAct<kMixed>(grad_out, i) *
                              (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du));
  }
}

}  // namespace

cudaError_t LaunchGeluForward(ActIn in, ActOut out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto kernel =
      AnyBf16({in.bf16, out.bf16}) ? GeluForwardKernel<true> : GeluForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(in, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchGeluBackward(ActIn in, ActIn grad_out, ActOut grad_in, int64_t count,
                               cudaStream_t stream) {
  if (count <= 0 || grad_in.data == nullptr) return cudaSuccess;
  const auto kernel = AnyBf16({in.bf16, grad_out.bf16, grad_in.bf16})
                          ? GeluBackwardKernel<true>
                          : GeluBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(in, grad_out, grad_in,
                                                                     count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
