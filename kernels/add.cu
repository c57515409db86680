// Elementwise addition and its gradient (the identity to both inputs).
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may alias a or b, which elementwise order allows.
__global__ void AddForwardKernel(const float* a, const float* b, float* out,
                                 int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = a[i] + b[i];
  }
}

// grad_a and grad_b may be the same buffer (out = x + x): one thread applies
// both updates in turn, so neither is lost.
__global__ void AddBackwardKernel(const float* grad_out, float* grad_a,
                                  float* grad_b, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad_out[i];
    if (grad_a != nullptr) grad_a[i] += g;
    if (grad_b != nullptr) grad_b[i] += g;
  }
}

}  // namespace

cudaError_t LaunchAddForward(const float* a, const float* b, float* out,
                             int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  AddForwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      a, b, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchAddBackward(const float* grad_out, float* grad_a,
                              float* grad_b, int64_t count,
                              cudaStream_t stream) {
  if (count <= 0 || (grad_a == nullptr && grad_b == nullptr)) return cudaSuccess;
  AddBackwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      grad_out, grad_a, grad_b, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
