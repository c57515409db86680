// SiLU: y = x·σ(x); dy/dx = σ(x)(1 + x(1 − σ(x))).
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// 1/(1 + e^−x): e^−x overflows to +inf for x < −88 and the quotient is 0,
// the right limit.
__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void SiluForwardKernel(const float* in, float* out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = in[i];
    out[i] = x * Sigmoid(x);
  }
}

__global__ void SiluBackwardKernel(const float* in, const float* grad_out,
                                   float* grad_in, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = in[i];
    const float s = Sigmoid(x);
    grad_in[i] += grad_out[i] * s * (1.0f + x * (1.0f - s));
  }
}

}  // namespace

cudaError_t LaunchSiluForward(const float* in, float* out, int64_t count,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  SiluForwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      in, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchSiluBackward(const float* in, const float* grad_out,
                               float* grad_in, int64_t count,
                               cudaStream_t stream) {
  if (count <= 0 || grad_in == nullptr) return cudaSuccess;
  SiluBackwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      in, grad_out, grad_in, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
