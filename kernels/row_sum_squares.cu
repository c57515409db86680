// Per-row sum of squares for the optimizers (Muon's per-matrix Frobenius
// norms, NorMuon's per-neuron statistics): out[r] = alpha·Σ_k in[r, k]² +
// beta·out[r]. One block owns a row: each thread sums a fixed strided set of
// its elements in double, then the block adds the threads' sums in a fixed
// tree — no atomics, the same bits every run, whatever the other rows.
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int64_t kMaxBlocks = 65535;

// in: (rows, cols); out: (rows). Block b takes rows b, b + grid, ...
__global__ void RowSumSquaresKernel(const float* in, int64_t rows, int64_t cols,
                                    float alpha, float beta, float* out) {
  __shared__ double warp_sums[kWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = in + r * cols;
    double sum = 0.0;
    for (int64_t k = threadIdx.x; k < cols; k += kThreads) {
      const double x = row[k];
      sum += x * x;
    }
    sum = WarpSum(sum);
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
      const double total = WarpSum(lane < kWarps ? warp_sums[lane] : 0.0);
      if (lane == 0) {
        // As the CPU reference: alpha applied in double, beta = 0 never
        // reads out (it may hold NaN).
        const double scaled = static_cast<double>(alpha) * total;
        out[r] = beta == 0.0f ? static_cast<float>(scaled)
                              : static_cast<float>(scaled + static_cast<double>(beta) * out[r]);
      }
    }
    __syncthreads();  // warp_sums is rewritten for the next row
  }
}

}  // namespace

cudaError_t LaunchRowSumSquares(const float* in, int64_t rows, int64_t cols,
                                float alpha, float beta, float* out,
                                cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
  SMALLEM_LAUNCH(RowSumSquaresKernel, blocks, kThreads, 0, stream)(in, rows, std::max<int64_t>(cols, 0),
                                                       alpha, beta, out);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
