// Keys and values borrowed from another layer (engine/cpu/share_kv.cc): the
// packed qkv [q | source's k, v] and its gradient routed back. Elementwise
// over (N, 3C); operands f32 or bf16 (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kMixed>
__global__ void ShareKvForwardKernel(ActIn q, ActIn source, ActOut out, int64_t rows,
                                     int64_t channels) {
  const int64_t width = 3 * channels, count = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / width, col = i % width;
    const float v = col < channels ? LoadAct<kMixed>(q, row * channels + col)
                                   : LoadAct<kMixed>(source, i);
    StoreAct<kMixed>(out, i, v);
  }
}

template <bool kMixed>
__global__ void ShareKvBackwardKernel(ActIn grad_out, ActOut grad_q, ActOut grad_source,
                                      int64_t rows, int64_t channels) {
  const int64_t width = 3 * channels, count = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / width, col = i % width;
    if (col < channels) {
      if (grad_q.data != nullptr) {
        AccumulateAct<kMixed>(grad_q, row * channels + col, LoadAct<kMixed>(grad_out, i));
      }
    } else if (grad_source.data != nullptr) {
      AccumulateAct<kMixed>(grad_source, i, LoadAct<kMixed>(grad_out, i));
    }
  }
}

}  // namespace

cudaError_t LaunchShareKvForward(ActIn q, ActIn source, ActOut out, int64_t rows,
                                 int64_t channels, cudaStream_t stream) {
  const int64_t count = rows * 3 * channels;
  if (count <= 0) return cudaSuccess;
  const auto kernel = AnyBf16({q.bf16, source.bf16, out.bf16}) ? ShareKvForwardKernel<true>
                                                               : ShareKvForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(q, source, out, rows,
                                                                     channels);
  return cudaGetLastError();
}

cudaError_t LaunchShareKvBackward(ActIn grad_out, ActOut grad_q, ActOut grad_source,
                                  int64_t rows, int64_t channels, cudaStream_t stream) {
  const int64_t count = rows * 3 * channels;
  if (count <= 0 || (grad_q.data == nullptr && grad_source.data == nullptr)) {
    return cudaSuccess;
  }
  const auto kernel = AnyBf16({grad_out.bf16, grad_q.bf16, grad_source.bf16})
                          ? ShareKvBackwardKernel<true>
                          : ShareKvBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(grad_out, grad_q,
                                                                     grad_source, rows, channels);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
