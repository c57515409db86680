// Mixture-of-experts dispatch and combine (engine/cpu/moe_permute.cc is the
// reference): each output element is written by one thread and sums in a
// fixed order (no atomics). Activations f32 or bf16 (kernels/activation.cuh).
#include "kernels/activation.cuh"
#include "kernels/device_util.cuh"
#include "kernels/moe_kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void DispatchKernel(ActIn x, const int32_t* order, ActOut out, int64_t rows,
                               int64_t c, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * c;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    Store(out, i, Load(x, (order[row] / k) * c + col));
  }
}

__global__ void DispatchBackwardKernel(ActIn grad_out, const int32_t* position, ActOut grad_x,
                                       int64_t n, int64_t c, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * c;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / c, col = i % c;
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += Load(grad_out, int64_t{position[t * k + j]} * c + col);
    Accumulate(grad_x, i, sum);
  }
}

__global__ void CombineKernel(ActIn rows, const float* gates, const int32_t* position,
                              ActOut out, int64_t n, int64_t c, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * c;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / c, col = i % c;
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      sum += gates[t * k + j] * Load(rows, int64_t{position[t * k + j]} * c + col);
    }
    Store(out, i, sum);
  }
}

// grad_rows: one thread per element of the slot's row (each row belongs to
// exactly one slot).
__global__ void CombineBackwardRowsKernel(const float* gates, const int32_t* position,
                                          ActIn grad_out, ActOut grad_rows, int64_t n,
                                          int64_t c, int64_t k, bool overwrite) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * k * c;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = i / c, col = i % c, t = slot / k;
    const int64_t at = int64_t{position[slot]} * c + col;
    const float v = gates[slot] * Load(grad_out, t * c + col);
    if (overwrite) Store(grad_rows, at, v);
    else Accumulate(grad_rows, at, v);
  }
}

// grad_gates: one thread per slot, a dot product over C in order.
__global__ void CombineBackwardGatesKernel(ActIn rows, const int32_t* position, ActIn grad_out,
                                           float* grad_gates, int64_t n, int64_t c, int64_t k) {
  const int64_t slot = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (slot >= n * k) return;
  const int64_t t = slot / k, row = position[slot];
  double dot = 0;
  for (int64_t col = 0; col < c; ++col) {
    dot += double{Load(rows, row * c + col)} * Load(grad_out, t * c + col);
  }
  grad_gates[slot] += static_cast<float>(dot);
}

}  // namespace

cudaError_t LaunchMoeDispatchForward(ActIn x, const int32_t* order, ActOut out, int64_t n,
                                     int64_t c, int64_t k, cudaStream_t stream) {
  const int64_t count = n * k * c;
  if (count <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(DispatchKernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(x, order, out,
                                                                            n * k, c, k);
  return cudaGetLastError();
}

cudaError_t LaunchMoeDispatchBackward(ActIn grad_out, const int32_t* position, ActOut grad_x,
                                      int64_t n, int64_t c, int64_t k, cudaStream_t stream) {
  if (n * c <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(DispatchBackwardKernel, GridStrideBlocks(n * c, kThreads), kThreads, 0, stream)(
      grad_out, position, grad_x, n, c, k);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombineForward(ActIn rows, const float* gates, const int32_t* position,
                                    ActOut out, int64_t n, int64_t c, int64_t k,
                                    cudaStream_t stream) {
  if (n * c <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(CombineKernel, GridStrideBlocks(n * c, kThreads), kThreads, 0, stream)(rows, gates,
                                                                           position, out, n, c, k);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombineBackward(ActIn rows, const float* gates, const int32_t* position,
                                     ActIn grad_out, ActOut grad_rows, float* grad_gates,
                                     int64_t n, int64_t c, int64_t k, bool overwrite_rows,
                                     cudaStream_t stream) {
  if (n * c <= 0) return cudaSuccess;
  if (grad_rows.data != nullptr) {
    SMALLEM_LAUNCH(CombineBackwardRowsKernel, GridStrideBlocks(n * k * c, kThreads), kThreads, 0, stream)(
        gates, position, grad_out, grad_rows, n, c, k, overwrite_rows);
  }
  if (grad_gates != nullptr) {
    SMALLEM_LAUNCH(CombineBackwardGatesKernel, (n * k + kThreads - 1) / kThreads, kThreads, 0, stream)(
        rows, position, grad_out, grad_gates, n, c, k);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
