// Elementwise addition and its gradient (the identity to both inputs).
// Operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may alias a or b, which elementwise order allows.
template <bool kMixed>
__global__ void AddForwardKernel(ActIn a, ActIn b, ActOut out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    StoreAct<kMixed>(out, i, LoadAct<kMixed>(a, i) + LoadAct<kMixed>(b, i));
  }
}

// grad_a and grad_b may be the same buffer (out = x + x): one thread applies
// both updates in turn, so neither is lost.
template <bool kMixed>
__global__ void AddBackwardKernel(ActIn grad_out, ActOut grad_a, ActOut grad_b,
                                  int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = LoadAct<kMixed>(grad_out, i);
    if (grad_a.data != nullptr) AccumulateAct<kMixed>(grad_a, i, g);
    if (grad_b.data != nullptr) AccumulateAct<kMixed>(grad_b, i, g);
  }
}

}  // namespace

cudaError_t LaunchAddForward(ActIn a, ActIn b, ActOut out, int64_t count,
                             cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto kernel = AnyBf16({a.bf16, b.bf16, out.bf16}) ? AddForwardKernel<true>
                                                          : AddForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(a, b, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchAddBackward(ActIn grad_out, ActOut grad_a, ActOut grad_b,
                              int64_t count, cudaStream_t stream) {
  if (count <= 0 || (grad_a.data == nullptr && grad_b.data == nullptr)) return cudaSuccess;
  const auto kernel = AnyBf16({grad_out.bf16, grad_a.bf16, grad_b.bf16})
                          ? AddBackwardKernel<true>
                          : AddBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(grad_out, grad_a, grad_b,
                                                                     count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
