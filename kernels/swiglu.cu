// SwiGLU, fused: out = silu(gate)·up. Gradients: d/d(up) = silu(gate),
// d/d(gate) = up·σ(gate)(1 + gate(1 − σ(gate))).
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gate, up, out: (N, F) flattened to `count`.
__global__ void SwiGluForwardKernel(const float* gate, const float* up,
                                    float* out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g * Sigmoid(g) * up[i];
  }
}

// grad_gate, grad_up: (N, F) +=, either may be null.
__global__ void SwiGluBackwardKernel(const float* gate, const float* up,
                                     const float* grad_out, float* grad_gate,
                                     float* grad_up, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad_out[i];
    const float x = gate[i];
    const float u = up[i];
    const float s = Sigmoid(x);
    if (grad_up != nullptr) grad_up[i] += g * x * s;
    if (grad_gate != nullptr) grad_gate[i] += g * u * s * (1.0f + x * (1.0f - s));
  }
}

}  // namespace

cudaError_t LaunchSwiGluForward(const float* gate, const float* up, float* out,
                                int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  SwiGluForwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      gate, up, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluBackward(const float* gate, const float* up,
                                 const float* grad_out, float* grad_gate,
                                 float* grad_up, int64_t count,
                                 cudaStream_t stream) {
  if (count <= 0 || (grad_gate == nullptr && grad_up == nullptr)) return cudaSuccess;
  SwiGluBackwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      gate, up, grad_out, grad_gate, grad_up, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
