// SwiGLU, fused: out = silu(gate)·up. Gradients: d/d(up) = silu(gate),
// d/d(gate) = up·σ(gate)(1 + gate(1 − σ(gate))).
// Operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gate, up, out: (N, F) flattened to `count`.
template <bool kMixed>
__global__ void SwiGluForwardKernel(ActIn gate, ActIn up, ActOut out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = LoadAct<kMixed>(gate, i);
    StoreAct<kMixed>(out, i, g * Sigmoid(g) * LoadAct<kMixed>(up, i));
  }
}

// grad_gate, grad_up: (N, F) +=, either may be null.
template <bool kMixed>
__global__ void SwiGluBackwardKernel(ActIn gate, ActIn up, ActIn grad_out,
                                     ActOut grad_gate, ActOut grad_up, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = LoadAct<kMixed>(grad_out, i);
    const float x = LoadAct<kMixed>(gate, i);
    const float u = LoadAct<kMixed>(up, i);
    const float s = Sigmoid(x);
    if (grad_up.data != nullptr) AccumulateAct<kMixed>(grad_up, i, g * x * s);
    if (grad_gate.data != nullptr) {
      AccumulateAct<kMixed>(grad_gate, i, g * u * s * (1.0f + x * (1.0f - s)));
    }
  }
}

}  // namespace

cudaError_t LaunchSwiGluForward(ActIn gate, ActIn up, ActOut out, int64_t count,
                                cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto kernel = AnyBf16({gate.bf16, up.bf16, out.bf16}) ? SwiGluForwardKernel<true>
                                                              : SwiGluForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(gate, up, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluBackward(ActIn gate, ActIn up, ActIn grad_out, ActOut grad_gate,
                                 ActOut grad_up, int64_t count, cudaStream_t stream) {
  if (count <= 0 || (grad_gate.data == nullptr && grad_up.data == nullptr)) return cudaSuccess;
  const auto kernel =
      AnyBf16({gate.bf16, up.bf16, grad_out.bf16, grad_gate.bf16, grad_up.bf16})
          ? SwiGluBackwardKernel<true>
          : SwiGluBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(gate, up, grad_out,
                                                                     grad_gate, grad_up, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
