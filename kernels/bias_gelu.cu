// The feed-forward's bias and GELU in one pass (engine/cpu/bias_gelu.cc is
// the reference): out = gelu(x + bias), tanh approximation as gelu.cu. The
// backward computes d = gelu'(x + bias)·grad_out once per element, writes or
// adds it to grad_x and sums it into the bias's gradient deterministically
// as bias_add.cu does: each warp sums a fixed group of rows into a partial
// row of scratch, then one thread per column adds the partial rows in order.
// x, out, grad_out and grad_x f32 or bf16 (kernels/activation_path.cuh);
// bias and its gradient f32.
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// Rows handled by one warp in the backward, summed into one partial row.
constexpr int64_t kRowsPerWarp = 16;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__host__ __device__ int64_t PartialRows(int64_t rows) {
  return (rows + kRowsPerWarp - 1) / kRowsPerWarp;
}

template <bool kMixed>
__global__ void BiasGeluForwardKernel(ActIn x, const float* bias, ActOut out, int64_t rows,
                                      int64_t cols) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = LoadAct<kMixed>(x, i) + (bias == nullptr ? 0.0f : bias[i % cols]);
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    StoreAct<kMixed>(out, i, 0.5f * v * (1.0f + tanhf(u)));
  }
}

// Warp `group` handles rows [group·kRowsPerWarp, +kRowsPerWarp), lanes
// across columns; partial (PartialRows(rows), cols) or null.
template <bool kMixed>
__global__ void BiasGeluBackwardKernel(ActIn x, const float* bias, ActIn grad_out,
                                       ActOut grad_x, bool overwrite, int64_t rows,
                                       int64_t cols, float* partial) {
  const int64_t group = blockIdx.x * int64_t{kWarps} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (group >= PartialRows(rows)) return;
  const int64_t first = group * kRowsPerWarp;
  const int64_t last = min(rows, first + kRowsPerWarp);
  for (int64_t c = lane; c < cols; c += kWarpSize) {
    const float b = bias == nullptr ? 0.0f : bias[c];
    float sum = 0.0f;
    for (int64_t r = first; r < last; ++r) {
      const int64_t i = r * cols + c;
      const float v = LoadAct<kMixed>(x, i) + b;
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      const float t = tanhf(u);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      const float d = LoadAct<kMixed>(grad_out, i) *
                      (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
      if (grad_x.data != nullptr) {
        if (overwrite) {
          StoreAct<kMixed>(grad_x, i, d);
        } else {
          AccumulateAct<kMixed>(grad_x, i, d);
        }
      }
      sum += d;
    }
    if (partial != nullptr) partial[group * cols + c] = sum;
  }
}

// grad_bias (cols) += Σ partial rows.
__global__ void BiasGeluBiasFinalKernel(const float* partial, int64_t parts, int64_t cols,
                                        float* grad_bias) {
  AddPartialRows(partial, parts, cols, grad_bias);
}

}  // namespace

cudaError_t LaunchBiasGeluForward(ActIn x, const float* bias, ActOut out, int64_t rows,
                                  int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const auto kernel = AnyBf16({x.bf16, out.bf16}) ? BiasGeluForwardKernel<true>
                                                  : BiasGeluForwardKernel<false>;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(rows * cols, kThreads), kThreads, 0, stream)(x, bias, out, rows,
                                                                          cols);
  return cudaGetLastError();
}

size_t BiasGeluBackwardScratchFloats(int64_t rows, int64_t cols) {
  return static_cast<size_t>(PartialRows(rows) * cols);
}

cudaError_t LaunchBiasGeluBackward(ActIn x, const float* bias, ActIn grad_out, ActOut grad_x,
                                   bool overwrite, float* grad_bias, int64_t rows,
                                   int64_t cols, float* scratch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || (grad_x.data == nullptr && grad_bias == nullptr)) {
    return cudaSuccess;
  }
  const int64_t parts = PartialRows(rows);
  float* partial = grad_bias == nullptr ? nullptr : scratch;
  const auto blocks = static_cast<unsigned>((parts + kWarps - 1) / kWarps);
  const auto kernel = AnyBf16({x.bf16, grad_out.bf16, grad_x.bf16})
                          ? BiasGeluBackwardKernel<true>
                          : BiasGeluBackwardKernel<false>;
  SMALLEM_LAUNCH(kernel, blocks, kThreads, 0, stream)(x, bias, grad_out, grad_x, overwrite, rows, cols,
                                          partial);
  if (grad_bias != nullptr) {
    const auto column_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
    SMALLEM_LAUNCH(BiasGeluBiasFinalKernel, column_blocks, kThreads, 0, stream)(partial, parts, cols,
                                                                   grad_bias);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
