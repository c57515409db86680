// Rotary positions on adjacent pairs: in each head, (x[2i], x[2i+1]) at
// position m rotates by θ = m·10000^(−2i/D), with cos θ and sin θ read from
// the host-computed tables (P, D/2). The backward rotates the gradient by −θ.
// One thread per rotated pair or passed-through channel. x, out and the
// gradients f32 or bf16 (kernels/activation_path.cuh); the tables f32.
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// Work items of one row: rotate_channels/2 pairs, then the channels that
// pass through.
__host__ __device__ int64_t UnitsPerRow(const RopeShape& s) {
  return s.rotate_channels / 2 + (s.width - s.rotate_channels);
}

// x, out: (rows, width), out may alias x (each thread reads its pair before
// writing it); cos, sin: (P, head_dim/2).
template <bool kMixed>
__global__ void RopeForwardKernel(ActIn x, ActOut out, const float* cos,
                                  const float* sin, RopeShape s) {
  const int64_t units = UnitsPerRow(s);
  const int64_t count = s.rows * units;
  const int64_t half = s.head_dim / 2;
  const int64_t pairs = s.rotate_channels / 2;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx / units;
    const int64_t unit = idx % units;
    const int64_t row_start = row * s.width;
    if (unit < pairs) {
      const int64_t position = row % s.time + s.position_offset;
      const int64_t i = unit % half;
      const float c = cos[position * half + i];
      const float sn = sin[position * half + i];
      const int64_t first = row_start + 2 * unit;
      const float x0 = LoadAct<kMixed>(x, first), x1 = LoadAct<kMixed>(x, first + 1);
      StoreAct<kMixed>(out, first, x0 * c - x1 * sn);
      StoreAct<kMixed>(out, first + 1, x0 * sn + x1 * c);
    } else {
      // A copy: exact when out and x share a dtype, else rounded once.
      const int64_t channel = row_start + s.rotate_channels + (unit - pairs);
      StoreAct<kMixed>(out, channel, LoadAct<kMixed>(x, channel));
    }
  }
}

// grad_out, grad_in: (rows, width), grad_in += rotation of grad_out by −θ.
template <bool kMixed>
__global__ void RopeBackwardKernel(ActIn grad_out, ActOut grad_in,
                                   const float* cos, const float* sin,
                                   RopeShape s) {
  const int64_t units = UnitsPerRow(s);
  const int64_t count = s.rows * units;
  const int64_t half = s.head_dim / 2;
  const int64_t pairs = s.rotate_channels / 2;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx / units;
    const int64_t unit = idx % units;
    const int64_t row_start = row * s.width;
    if (unit < pairs) {
      const int64_t position = row % s.time + s.position_offset;
      const int64_t i = unit % half;
      const float c = cos[position * half + i];
      const float sn = sin[position * half + i];
      const int64_t first = row_start + 2 * unit;
      const float g0 = LoadAct<kMixed>(grad_out, first);
      const float g1 = LoadAct<kMixed>(grad_out, first + 1);
      AccumulateAct<kMixed>(grad_in, first, g0 * c + g1 * sn);
      AccumulateAct<kMixed>(grad_in, first + 1, g1 * c - g0 * sn);
    } else {
      const int64_t channel = row_start + s.rotate_channels + (unit - pairs);
      AccumulateAct<kMixed>(grad_in, channel, LoadAct<kMixed>(grad_out, channel));
    }
  }
}

bool Valid(const RopeShape& s) {
  return s.rows > 0 && s.width > 0 && s.time > 0 && s.head_dim > 0 &&
         s.head_dim % 2 == 0 && s.rotate_channels >= 0 &&
         s.rotate_channels % s.head_dim == 0 && s.rotate_channels <= s.width;
}

}  // namespace

cudaError_t LaunchRopeForward(ActIn x, ActOut out, const float* cos,
                              const float* sin, const RopeShape& shape,
                              cudaStream_t stream) {
  if (shape.rows == 0) return cudaSuccess;
  if (!Valid(shape)) return cudaErrorInvalidValue;
  // In place, the pass-through units copy a channel onto itself: harmless,
  // and cheaper than a second kernel.
  const auto kernel =
      AnyBf16({x.bf16, out.bf16}) ? RopeForwardKernel<true> : RopeForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(shape.rows * UnitsPerRow(shape), kThreads), kThreads, 0, stream)(x, out, cos, sin, shape);
  return cudaGetLastError();
}

cudaError_t LaunchRopeBackward(ActIn grad_out, ActOut grad_in,
                               const float* cos, const float* sin,
                               const RopeShape& shape, cudaStream_t stream) {
  if (shape.rows == 0 || grad_in.data == nullptr) return cudaSuccess;
  if (!Valid(shape) || grad_in.data == grad_out.data) return cudaErrorInvalidValue;
  const auto kernel = AnyBf16({grad_out.bf16, grad_in.bf16}) ? RopeBackwardKernel<true>
                                                             : RopeBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(shape.rows * UnitsPerRow(shape), kThreads), kThreads, 0, stream)(grad_out, grad_in, cos, sin, shape);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
