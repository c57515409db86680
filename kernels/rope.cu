// Rotary positions on adjacent pairs: in each head, (x[2i], x[2i+1]) at
// position m rotates by θ = m·10000^(−2i/D), with cos θ and sin θ read from
// the host-computed tables (P, D/2). The backward rotates the gradient by −θ.
// One thread per rotated pair or passed-through channel.
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
__global__ void RopeForwardKernel(const float* x, float* out, const float* cos,
                                  const float* sin, RopeShape s) {
  const int64_t units = UnitsPerRow(s);
  const int64_t count = s.rows * units;
  const int64_t half = s.head_dim / 2;
  const int64_t pairs = s.rotate_channels / 2;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx / units;
    const int64_t unit = idx % units;
    const float* x_row = x + row * s.width;
    float* out_row = out + row * s.width;
    if (unit < pairs) {
      const int64_t position = row % s.time + s.position_offset;
      const int64_t i = unit % half;
      const float c = cos[position * half + i];
      const float sn = sin[position * half + i];
      const float x0 = x_row[2 * unit], x1 = x_row[2 * unit + 1];
      out_row[2 * unit] = x0 * c - x1 * sn;
      out_row[2 * unit + 1] = x0 * sn + x1 * c;
    } else {
      const int64_t channel = s.rotate_channels + (unit - pairs);
      out_row[channel] = x_row[channel];
    }
  }
}

// grad_out, grad_in: (rows, width), grad_in += rotation of grad_out by −θ.
__global__ void RopeBackwardKernel(const float* grad_out, float* grad_in,
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
    const float* g_row = grad_out + row * s.width;
    float* gi_row = grad_in + row * s.width;
    if (unit < pairs) {
      const int64_t position = row % s.time + s.position_offset;
      const int64_t i = unit % half;
      const float c = cos[position * half + i];
      const float sn = sin[position * half + i];
      const float g0 = g_row[2 * unit], g1 = g_row[2 * unit + 1];
      gi_row[2 * unit] += g0 * c + g1 * sn;
      gi_row[2 * unit + 1] += g1 * c - g0 * sn;
    } else {
      const int64_t channel = s.rotate_channels + (unit - pairs);
      gi_row[channel] += g_row[channel];
    }
  }
}

bool Valid(const RopeShape& s) {
  return s.rows > 0 && s.width > 0 && s.time > 0 && s.head_dim > 0 &&
         s.head_dim % 2 == 0 && s.rotate_channels >= 0 &&
         s.rotate_channels % s.head_dim == 0 && s.rotate_channels <= s.width;
}

}  // namespace

cudaError_t LaunchRopeForward(const float* x, float* out, const float* cos,
                              const float* sin, const RopeShape& shape,
                              cudaStream_t stream) {
  if (shape.rows == 0) return cudaSuccess;
  if (!Valid(shape)) return cudaErrorInvalidValue;
  // In place, the pass-through units copy a channel onto itself: harmless,
  // and cheaper than a second kernel.
  RopeForwardKernel<<<GridStrideBlocks(shape.rows * UnitsPerRow(shape), kThreads),
                      kThreads, 0, stream>>>(x, out, cos, sin, shape);
  return cudaGetLastError();
}

cudaError_t LaunchRopeBackward(const float* grad_out, float* grad_in,
                               const float* cos, const float* sin,
                               const RopeShape& shape, cudaStream_t stream) {
  if (shape.rows == 0 || grad_in == nullptr) return cudaSuccess;
  if (!Valid(shape) || grad_in == grad_out) return cudaErrorInvalidValue;
  RopeBackwardKernel<<<GridStrideBlocks(shape.rows * UnitsPerRow(shape), kThreads),
                       kThreads, 0, stream>>>(grad_out, grad_in, cos, sin, shape);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
