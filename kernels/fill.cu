// Fill: every element of a buffer set to one value (f32, bf16 or i32).
#include <cuda_bf16.h>

#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

template <typename T>
__global__ void FillKernel(T* data, int64_t count, T value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}

template <typename T>
cudaError_t Fill(T* data, int64_t count, T value, cudaStream_t stream) {
  constexpr int kThreads = 256;
  SMALLEM_LAUNCH(FillKernel<T>, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(
      data, count, value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchFill(void* data, int64_t count, FillType type, float value,
                       cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (type) {
    case FillType::kF32:
      return Fill(static_cast<float*>(data), count, value, stream);
    case FillType::kBf16:
      return Fill(static_cast<__nv_bfloat16*>(data), count,
                  __float2bfloat16_rn(value), stream);
    case FillType::kI32:
      return Fill(static_cast<int32_t*>(data), count,
                  static_cast<int32_t>(value), stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace smallem::cuda
