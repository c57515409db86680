// Elementwise product and its gradient: d(a·b)/da = b, d(a·b)/db = a.
// Operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may alias a or b, which elementwise order allows.
template <bool kMixed>
__global__ void MulForwardKernel(ActIn a, ActIn b, ActOut out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    StoreAct<kMixed>(out, i, LoadAct<kMixed>(a, i) * LoadAct<kMixed>(b, i));
  }
}

// Reads a[i] and b[i] before either update, so grad_a == grad_b (or a
// gradient aliasing an input) still gets both contributions right.
template <bool kMixed>
__global__ void MulBackwardKernel(ActIn a, ActIn b, ActIn grad_out, ActOut grad_a,
                                  ActOut grad_b, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = LoadAct<kMixed>(grad_out, i);
    const float a_i = grad_b.data != nullptr ? LoadAct<kMixed>(a, i) : 0.0f;
    const float b_i = grad_a.data != nullptr ? LoadAct<kMixed>(b, i) : 0.0f;
    if (grad_a.data != nullptr) AccumulateAct<kMixed>(grad_a, i, g * b_i);
    if (grad_b.data != nullptr) AccumulateAct<kMixed>(grad_b, i, g * a_i);
  }
}

}  // namespace

cudaError_t LaunchMulForward(ActIn a, ActIn b, ActOut out, int64_t count,
                             cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto kernel = AnyBf16({a.bf16, b.bf16, out.bf16}) ? MulForwardKernel<true>
                                                          : MulForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(a, b, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchMulBackward(ActIn a, ActIn b, ActIn grad_out, ActOut grad_a,
                              ActOut grad_b, int64_t count, cudaStream_t stream) {
  if (count <= 0 || (grad_a.data == nullptr && grad_b.data == nullptr)) return cudaSuccess;
  const auto kernel =
      AnyBf16({a.bf16, b.bf16, grad_out.bf16, grad_a.bf16, grad_b.bf16})
          ? MulBackwardKernel<true>
          : MulBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(a, b, grad_out, grad_a,
                                                                     grad_b, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
