// SiLU: y = x·σ(x); dy/dx = σ(x)(1 + x(1 − σ(x))).
// Operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// 1/(1 + e^−x): e^−x overflows to +inf for x < −88 and the quotient is 0,
// the right limit.
__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <bool kMixed>
__global__ void SiluForwardKernel(ActIn in, ActOut out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = LoadAct<kMixed>(in, i);
    StoreAct<kMixed>(out, i, x * Sigmoid(x));
  }
}

template <bool kMixed>
__global__ void SiluBackwardKernel(ActIn in, ActIn grad_out, ActOut grad_in,
                                   int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = LoadAct<kMixed>(in, i);
    const float s = Sigmoid(x);
    AccumulateAct<kMixed>(grad_in, i,
                          LoadAct<kMixed>(grad_out, i) * s * (1.0f + x * (1.0f - s)));
  }
}

}  // namespace

cudaError_t LaunchSiluForward(ActIn in, ActOut out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto kernel =
      AnyBf16({in.bf16, out.bf16}) ? SiluForwardKernel<true> : SiluForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(in, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchSiluBackward(ActIn in, ActIn grad_out, ActOut grad_in, int64_t count,
                               cudaStream_t stream) {
  if (count <= 0 || grad_in.data == nullptr) return cudaSuccess;
  const auto kernel = AnyBf16({in.bf16, grad_out.bf16, grad_in.bf16})
                          ? SiluBackwardKernel<true>
                          : SiluBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(in, grad_out, grad_in,
                                                                     count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
