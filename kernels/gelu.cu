// GELU, tanh approximation: y = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³).
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void GeluForwardKernel(const float* in, float* out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = in[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(u));
  }
}

__global__ void GeluBackwardKernel(const float* in, const float* grad_out,
                                   float* grad_in, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = in[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = tanhf(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    grad_in[i] += grad_out[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
}

}  // namespace

cudaError_t LaunchGeluForward(const float* in, float* out, int64_t count,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  GeluForwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      in, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchGeluBackward(const float* in, const float* grad_out,
                               float* grad_in, int64_t count,
                               cudaStream_t stream) {
  if (count <= 0 || grad_in == nullptr) return cudaSuccess;
  GeluBackwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      in, grad_out, grad_in, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
