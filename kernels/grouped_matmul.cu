// Grouped product (engine/cpu/grouped_matmul.cc is the reference): group g
// owns rows [offsets[g], offsets[g + 1]) of x (rows, k) and multiplies them
// by its own weight[g] (m, k). Three shared-memory tiled products:
//   forward   out_g    = x_g · W_gᵀ         (rows_g × m, reduced over k)
//   backward  grad_x_g = grad_out_g · W_g   (rows_g × k, reduced over m)
//   backward  grad_W_g += grad_out_gᵀ · x_g (m × k, reduced over rows_g)
// Tiling: a block of 16×16 threads computes a 64×64 output tile, each thread
// 4×4 outputs 16 apart (so shared-memory reads are conflict-free); the
// reduction advances in slices of 16, both operands' slices staged in shared
// memory, zeros past every edge. Grid: blockIdx.z the group, blockIdx.x the
// column tile, blockIdx.y the row tile; the row-tile count is an upper bound
// (from all rows, since the offsets are read on the device so that a step
// stays capturable) and a block strides past its group's end. Each output
// adds its products in order of the reduction index, f32, no atomics: the
// same inputs give the same bits. No tensor cores yet; not yet run on a GPU
// (docs/benchmarks.md).
#include "kernels/activation.cuh"
#include "kernels/device_util.cuh"
#include "kernels/moe_kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kTile = 64;                   // output tile side
constexpr int kSide = 16;                   // threads per tile side
constexpr int kPer = kTile / kSide;         // outputs per thread per side
constexpr int kSlice = 16;                  // reduction slice staged at once
constexpr int kThreads = kSide * kSide;
constexpr int kStride = kTile + 2;          // padded: conflict-free staging
constexpr unsigned kMaxGridY = 65535;

// One operand of a tile product: element (i, p), i along the output tile's
// side and p along the reduction, at data[corner + i·ld + p] when
// `along_depth` (contiguous in p) and at data[corner + p·ld + i] otherwise.
// Elements with i ≥ extent lie past the operand's edge.
struct Operand {
  ActIn data;
  int64_t corner, ld;
  bool along_depth;
  int64_t extent;
};

using Slice = float[kSlice][kStride];

// s[p][i] = op(i, p0 + p), zero past the edge or past `depth`.
__device__ void StageSlice(const Operand& op, int64_t p0, int64_t depth, int tid, Slice s) {
  for (int e = tid; e < kSlice * kTile; e += kThreads) {
    const int i = op.along_depth ? e / kSlice : e % kTile;
    const int p = op.along_depth ? e % kSlice : e / kTile;
    float v = 0.0f;
    if (i < op.extent && p0 + p < depth) {
      v = Load(op.data, op.along_depth ? op.corner + i * op.ld + (p0 + p)
                                       : op.corner + (p0 + p) * op.ld + i);
    }
    s[p][i] = v;
  }
}

// acc[r][c] = Σ_p a(ty + 16r, p)·b(tx + 16c, p) over p in [0, depth), in
// order of p. Every thread of the block must call it (it synchronizes).
__device__ void TileProduct(const Operand& a, const Operand& b, int64_t depth,
                            float acc[kPer][kPer]) {
  __shared__ Slice sa, sb;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kSide + tx;
  for (int r = 0; r < kPer; ++r) {
    for (int c = 0; c < kPer; ++c) acc[r][c] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < depth; p0 += kSlice) {
    StageSlice(a, p0, depth, tid, sa);
    StageSlice(b, p0, depth, tid, sb);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kSlice; ++p) {
      float av[kPer], bv[kPer];
      for (int r = 0; r < kPer; ++r) av[r] = sa[p][ty + r * kSide];
      for (int c = 0; c < kPer; ++c) bv[c] = sb[p][tx + c * kSide];
      for (int r = 0; r < kPer; ++r) {
        for (int c = 0; c < kPer; ++c) acc[r][c] += av[r] * bv[c];
      }
    }
    __syncthreads();
  }
}

// Output (i, j) of the tile at out[corner + i·ld + j] for i < rows, j < cols:
// stored, or added when `accumulate`.
__device__ void WriteTile(const float acc[kPer][kPer], ActOut out, int64_t corner, int64_t ld,
                          int64_t rows, int64_t cols, bool accumulate) {
  for (int r = 0; r < kPer; ++r) {
    for (int c = 0; c < kPer; ++c) {
      const int i = threadIdx.y + r * kSide, j = threadIdx.x + c * kSide;
      if (i >= rows || j >= cols) continue;
      if (accumulate) Accumulate(out, corner + i * ld + j, acc[r][c]);
      else Store(out, corner + i * ld + j, acc[r][c]);
    }
  }
}

// out_g = x_g · W_gᵀ: tile rows are the group's rows, tile columns m.
__global__ void ForwardKernel(ActIn x, const float* weight, const int32_t* offsets,
                              ActOut out, int64_t m, int64_t k) {
  const int64_t g = blockIdx.z, begin = offsets[g], rows = offsets[g + 1] - begin;
  const int64_t col = int64_t{blockIdx.x} * kTile;
  for (int64_t row = int64_t{blockIdx.y} * kTile; row < rows; row += int64_t{gridDim.y} * kTile) {
    float acc[kPer][kPer];
    TileProduct({x, (begin + row) * k, k, true, rows - row},
                {ActIn{weight, false}, (g * m + col) * k, k, true, m - col}, k, acc);
    WriteTile(acc, out, (begin + row) * m + col, m, rows - row, m - col, false);
  }
}

// grad_x_g (+)= grad_out_g · W_g: tile rows the group's rows, columns k.
__global__ void BackwardXKernel(ActIn grad_out, const float* weight, const int32_t* offsets,
                                ActOut grad_x, int64_t m, int64_t k, bool overwrite) {
  const int64_t g = blockIdx.z, begin = offsets[g], rows = offsets[g + 1] - begin;
  const int64_t col = int64_t{blockIdx.x} * kTile;
  for (int64_t row = int64_t{blockIdx.y} * kTile; row < rows; row += int64_t{gridDim.y} * kTile) {
    float acc[kPer][kPer];
    TileProduct({grad_out, (begin + row) * m, m, true, rows - row},
                {ActIn{weight, false}, g * m * k + col, k, false, k - col}, m, acc);
    WriteTile(acc, grad_x, (begin + row) * k + col, k, rows - row, k - col, !overwrite);
  }
}

// grad_W_g += grad_out_gᵀ · x_g: tile rows m, columns k, reduced over the
// group's rows. An empty group's gradient is left untouched.
__global__ void BackwardWeightKernel(ActIn grad_out, ActIn x, const int32_t* offsets,
                                     float* grad_weight, int64_t m, int64_t k) {
  const int64_t g = blockIdx.z, begin = offsets[g], rows = offsets[g + 1] - begin;
  if (rows == 0) return;
  const int64_t row = int64_t{blockIdx.y} * kTile, col = int64_t{blockIdx.x} * kTile;
  float acc[kPer][kPer];
  TileProduct({grad_out, begin * m + row, m, false, m - row},
              {x, begin * k + col, k, false, k - col}, rows, acc);
  WriteTile(acc, ActOut{grad_weight, false}, g * m * k + row * k + col, k, m - row, k - col,
            true);
}

unsigned Tiles(int64_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

// Column tiles × row tiles (an upper bound, capped: blocks stride) × groups.
dim3 GroupRowsGrid(int64_t cols, int64_t rows, int64_t groups) {
  return dim3(Tiles(cols), std::min(Tiles(rows), kMaxGridY), static_cast<unsigned>(groups));
}

}  // namespace

cudaError_t LaunchGroupedMatmulForward(ActIn x, const float* weight, const int32_t* offsets,
                                       ActOut out, int64_t rows, int64_t groups, int64_t m,
                                       int64_t k, cudaStream_t stream) {
  if (rows * m <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(ForwardKernel, GroupRowsGrid(m, rows, groups), dim3(kSide, kSide), 0, stream)(
      x, weight, offsets, out, m, k);
  return cudaGetLastError();
}

cudaError_t LaunchGroupedMatmulBackward(ActIn x, const float* weight, const int32_t* offsets,
                                        ActIn grad_out, ActOut grad_x, float* grad_weight,
                                        int64_t rows, int64_t groups, int64_t m, int64_t k,
                                        bool overwrite_x, cudaStream_t stream) {
  if (grad_x.data != nullptr && rows * k > 0) {
    SMALLEM_LAUNCH(BackwardXKernel, GroupRowsGrid(k, rows, groups), dim3(kSide, kSide), 0, stream)(
        grad_out, weight, offsets, grad_x, m, k, overwrite_x);
  }
  if (grad_weight != nullptr && groups * m * k > 0) {
    const dim3 grid(Tiles(k), Tiles(m), static_cast<unsigned>(groups));
    SMALLEM_LAUNCH(BackwardWeightKernel, grid, dim3(kSide, kSide), 0, stream)(grad_out, x, offsets,
                                                                   grad_weight, m, k);
  }
  return cudaGetLastError();
}

}  // namespace smallem::cuda
