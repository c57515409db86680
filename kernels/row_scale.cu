// Per-row scaling for the optimizers: out[r, :] = in[r, :]·f_r with
// f_r = a·√numer[r] / √(denom[r] + eps), a = alpha (times scale[0], a factor
// read on the device, when given). f_r is computed in double and rounded to
// f32 once, exactly as the CPU reference does (IEEE sqrt and division), so
// the two backends agree bit for bit.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// in, out: (rows, cols), out may alias in; numer, denom: (rows) or null;
// scale: (1) or null.
__global__ void RowScaleKernel(const float* in, int64_t rows, int64_t cols,
                               const float* numer, const float* denom,
                               const float* scale, float alpha, float eps,
                               float* out) {
  // An f32 product, as the CPU computes it before widening.
  const float a = scale != nullptr ? alpha * scale[0] : alpha;
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    double factor = a;
    if (numer != nullptr) factor *= sqrt(fmax(0.0, static_cast<double>(numer[r])));
    if (denom != nullptr) {
      const double d = static_cast<double>(denom[r]) + eps;
      // A zero row has a zero statistic: keep it zero rather than 0/0.
      factor = d > 0 ? factor / sqrt(d) : 0.0;
    }
    out[i] = in[i] * static_cast<float>(factor);
  }
}

}  // namespace

cudaError_t LaunchRowScale(const float* in, int64_t rows, int64_t cols,
                           const float* numer, const float* denom,
                           const float* scale, float alpha, float eps,
                           float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(RowScaleKernel, GridStrideBlocks(rows * cols, kThreads), kThreads, 0, stream)(
      in, rows, cols, numer, denom, scale, alpha, eps, out);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
