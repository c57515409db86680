// Elementwise product and its gradient: d(a·b)/da = b, d(a·b)/db = a.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// No __restrict__: out may alias a or b, which elementwise order allows.
__global__ void MulForwardKernel(const float* a, const float* b, float* out,
                                 int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = a[i] * b[i];
  }
}

// Reads a[i] and b[i] before either update, so grad_a == grad_b (or a
// gradient aliasing an input) still gets both contributions right.
__global__ void MulBackwardKernel(const float* a, const float* b,
                                  const float* grad_out, float* grad_a,
                                  float* grad_b, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad_out[i];
    const float a_i = grad_b != nullptr ? a[i] : 0.0f;
    const float b_i = grad_a != nullptr ? b[i] : 0.0f;
    if (grad_a != nullptr) grad_a[i] += g * b_i;
    if (grad_b != nullptr) grad_b[i] += g * a_i;
  }
}

}  // namespace

cudaError_t LaunchMulForward(const float* a, const float* b, float* out,
                             int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  MulForwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      a, b, out, count);
  return cudaGetLastError();
}

cudaError_t LaunchMulBackward(const float* a, const float* b,
                              const float* grad_out, float* grad_a,
                              float* grad_b, int64_t count,
                              cudaStream_t stream) {
  if (count <= 0 || (grad_a == nullptr && grad_b == nullptr)) return cudaSuccess;
  MulBackwardKernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      a, b, grad_out, grad_a, grad_b, count);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
