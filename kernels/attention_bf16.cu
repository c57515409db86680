// Causal multi-head attention on the tensor cores: the bf16 variant of
// attention.cu, which CudaBackend runs when its matmuls are bf16 (the speed
// mode). Same contract (kernels.h): qkv in, out and lse out, gradients
// accumulated (+=); qkv, out, grad_out and grad_qkv each f32 or bf16, lse
// f32. q, k, v, dO, P and dS are rounded to bf16 as they enter the tensor
// cores (WMMA 16×16×16 tiles, f32 accumulation): f32 operands are rounded
// as their tiles are loaded, bf16 ones copied as they are (16 bytes at a
// time; q times 1/√D is rounded again). The scores, the softmax statistics,
// lse and delta stay f32; out is rounded once as it is stored, and a bf16
// gradient accumulates as bf16(f32(grad) + sum). Accuracy is that of the
// bf16 matmuls (~1e-2 relative), not attention.cu's ~1e-6.
//
// Forward: a block owns kRows = 64 queries of one (batch, head) pair, 16 per
// warp, and walks 64-key tiles up to its last query. Per tile and warp:
// S (16, 64) = Q·Kᵀ into shared f32; an online softmax on the warp's 16 rows
// (two lanes per row, 32 columns each); P rounded to bf16; the f32 output
// accumulator, kept in shared memory so that each row can be rescaled by its
// softmax correction, += P·V.
//
// Backward, recomputing P = exp(S − lse) as attention.cu does:
//   delta = rowsum(dO ∘ O) (f32),  dP = dO·Vᵀ,  dS = P ∘ (dP − delta),
//   dQ = scale·dS·K (one kernel per query tile, walking key tiles),
//   dK = scale·dSᵀ·Q, dV = Pᵀ·dO (one kernel per key tile, walking query
//   tiles; it computes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ directly).
// No atomics: every gradient element is summed by one warp in an order fixed
// by the shapes, so results are bitwise repeatable.
//
// WMMA needs 32-byte aligned tile pointers and leading dimensions that are
// multiples of 16 bytes: every shared buffer below starts at a multiple of
// 32 bytes and rows are padded (+8 bf16, +4 f32), which also spreads them
// over the banks.
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>

#include "kernels/activation.cuh"
#include "kernels/attention_common.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kFrag = 16;               // WMMA tile edge
constexpr int kRows = kWarps * kFrag;   // rows a block owns (queries, or keys)
constexpr int kTile = 64;               // rows of the tiles a block walks
constexpr int kHalf = kTile / 2;        // tile columns per lane (two lanes per row)
static_assert(kTile == kRows, "the key kernel starts walking at its own tile");

// Leading dimensions, in elements.
template <int D>
__host__ __device__ constexpr int TileStride() {  // bf16 (rows, D) tiles
  return D + 8;
}
constexpr int kScoreStride = kTile + 4;  // f32 (16, kTile) scores
constexpr int kProbStride = kTile + 8;   // bf16 (16, kTile) probabilities
template <int D>
__host__ __device__ constexpr int AccStride() {  // f32 (16, D) accumulators
  return D + 4;
}

using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

// Bytes of the shared buffers.
template <int D>
__host__ __device__ constexpr size_t TileBytes() {
  return sizeof(bf16) * kTile * TileStride<D>();
}
constexpr size_t kScoreBytes = sizeof(float) * kFrag * kScoreStride;
constexpr size_t kProbBytes = sizeof(bf16) * kFrag * kProbStride;
template <int D>
__host__ __device__ constexpr size_t AccBytes() {
  return sizeof(float) * kFrag * AccStride<D>();
}
static_assert(kScoreBytes % 32 == 0 && kProbBytes % 32 == 0, "WMMA alignment");

struct Geometry {
  int time, heads;
  int64_t channels;  // C = H·D
  float scale;       // 1/√D
};

// Element offset of head h's slice of part (0 q, 1 k, 2 v) at (b, t) in qkv.
template <int D>
__device__ __forceinline__ int64_t QkvOffset(const Geometry& g, int b, int t, int h,
                                             int part) {
  return (static_cast<int64_t>(b) * g.time + t) * 3 * g.channels + part * g.channels +
         static_cast<int64_t>(h) * D;
}

// Offset of head h at (b, t) in a (B, T, C) tensor.
template <int D>
__device__ __forceinline__ int64_t OutOffset(const Geometry& g, int b, int t, int h) {
  return (static_cast<int64_t>(b) * g.time + t) * g.channels + static_cast<int64_t>(h) * D;
}

// dst (kTile, D) bf16, row stride TileStride<D>() = rows t0, t0 + 1, … of
// src times `factor`, rounded to nearest even; rows at or beyond T are zero,
// so that masked products never meet garbage. src_offset(t) gives each row.
template <int D, typename Offset>
__device__ __forceinline__ void LoadTile(const float* src, Offset src_offset, int t0, int time,
                                         float factor, bf16* dst) {
  for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int t = t0 + r;
    const float v = t < time ? src[src_offset(t) + d] * factor : 0.0f;
    dst[r * TileStride<D>() + d] = __float2bfloat16_rn(v);
  }
}

// The same from bf16 src, 16 bytes (8 elements) at a time: a copy when
// factor is 1, else each element times factor, rounded again. src and every
// row offset must be 16-byte aligned (rows start at multiples of D
// elements; the launchers check src); dst rows are TileStride<D>() · 2
// bytes apart, a multiple of 16.
template <int D, typename Offset>
__device__ __forceinline__ void LoadTile(const bf16* src, Offset src_offset, int t0, int time,
                                         float factor, bf16* dst) {
  constexpr int kChunk = 8;
  constexpr int kChunks = D / kChunk;  // per row
  static_assert(D % kChunk == 0 && TileStride<D>() % kChunk == 0, "16-byte chunks");
  for (int idx = threadIdx.x; idx < kTile * kChunks; idx += kThreads) {
    const int r = idx / kChunks, chunk = idx % kChunks;
    const int t = t0 + r;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);  // eight bf16 zeros
    if (t < time) {
      v = *reinterpret_cast<const uint4*>(src + src_offset(t) + chunk * kChunk);
      if (factor != 1.0f) {
        __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
        for (int i = 0; i < kChunk / 2; ++i) {
          const float2 x = __bfloat1622float2(pairs[i]);
          pairs[i] = __floats2bfloat162_rn(x.x * factor, x.y * factor);
        }
      }
    }
    *reinterpret_cast<uint4*>(dst + r * TileStride<D>() + chunk * kChunk) = v;
  }
}

// LoadTile from an activation of either type: the branch is the block's,
// once per tile.
template <int D, typename Offset>
__device__ __forceinline__ void LoadTile(ActIn src, Offset src_offset, int t0, int time,
                                         float factor, bf16* dst) {
  if (src.bf16) {
    LoadTile<D>(static_cast<const bf16*>(src.data), src_offset, t0, time, factor, dst);
  } else {
    LoadTile<D>(static_cast<const float*>(src.data), src_offset, t0, time, factor, dst);
  }
}

// out (16, kTile) f32, row stride kScoreStride = a (16, D) · bᵀ where a and
// b are bf16 tiles (row stride TileStride<D>()) starting at the warp's rows
// of a and at row 0 of b: b's rows are the product's columns.
template <int D>
__device__ __forceinline__ void ProductWithTransposed(const bf16* a, const bf16* b, float* out) {
  FragA fa[D / kFrag];
#pragma unroll
  for (int kk = 0; kk < D / kFrag; ++kk) {
    wmma::load_matrix_sync(fa[kk], a + kk * kFrag, TileStride<D>());
  }
#pragma unroll
  for (int n = 0; n < kTile / kFrag; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / kFrag; ++kk) {
      FragBt fb;
      wmma::load_matrix_sync(fb, b + n * kFrag * TileStride<D>() + kk * kFrag, TileStride<D>());
      wmma::mma_sync(acc, fa[kk], fb, acc);
    }
    wmma::store_matrix_sync(out + n * kFrag, acc, kScoreStride, wmma::mem_row_major);
  }
}

// acc[n] (16, 16) += p (16, kTile) bf16 (row stride kProbStride) · columns
// [16n, 16n + 16) of b (kTile, D) bf16 (row stride TileStride<D>()).
template <int D>
__device__ __forceinline__ void AccumulateProduct(const bf16* p, const bf16* b,
                                                  FragC (&acc)[D / kFrag]) {
  FragA fa[kTile / kFrag];
#pragma unroll
  for (int kk = 0; kk < kTile / kFrag; ++kk) {
    wmma::load_matrix_sync(fa[kk], p + kk * kFrag, kProbStride);
  }
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) {
#pragma unroll
    for (int kk = 0; kk < kTile / kFrag; ++kk) {
      FragB fb;
      wmma::load_matrix_sync(fb, b + kk * kFrag * TileStride<D>() + n * kFrag, TileStride<D>());
      wmma::mma_sync(acc[n], fa[kk], fb, acc[n]);
    }
  }
}

// Adds the warp's (16, D) accumulator, staged through `stage` (f32, row
// stride AccStride<D>()), times `factor`, to the D elements of dst at
// row_offset(r) for each of its rows r, where this lane's row is `valid`.
// Lanes 2r and 2r + 1 add the two halves of row r.
template <int D, typename RowOffset>
__device__ __forceinline__ void AddAccumulator(const FragC (&acc)[D / kFrag], float* stage,
                                               bool valid, ActOut dst, RowOffset row_offset,
                                               float factor) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = lane / 2, half = lane % 2;
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) {
    wmma::store_matrix_sync(stage + n * kFrag, acc[n], AccStride<D>(), wmma::mem_row_major);
  }
  __syncwarp();
  if (valid) {
    const float* src = stage + row * AccStride<D>() + half * (D / 2);
    const int64_t offset = row_offset(row) + half * (D / 2);
    if (dst.bf16) {
      for (int d = 0; d < D / 2; ++d) Accumulate(dst, offset + d, factor * src[d]);
    } else {
      float* f32 = static_cast<float*>(dst.data) + offset;
      for (int d = 0; d < D / 2; ++d) f32[d] += factor * src[d];
    }
  }
  __syncwarp();  // read before the stage is written again
}

// e^x as 2^(x·log2 e): the hardware's exp2, ample for weights rounded to bf16.
__device__ __forceinline__ float Exp(float x) { return exp2f(x * 1.4426950408889634f); }

// ---------------------------------------------------------------- forward

template <int D>
constexpr size_t ForwardSmemBytes() {
  // q, k, v tiles; per warp: scores, probabilities, output accumulator.
  return 3 * TileBytes<D>() + kWarps * (kScoreBytes + kProbBytes + AccBytes<D>());
}

// qkv: (B, T, 3C); out: (B, T, C); lse: (B, H, T) or null.
// grid: (B·H, query tiles), block: kThreads, dynamic smem ForwardSmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionForwardBf16Kernel(ActIn qkv, ActOut out, float* lse, Geometry g) {
  SMALLEM_DYNAMIC_SHARED(unsigned char, smem, 128);
  bf16* q_s = reinterpret_cast<bf16*>(smem);                 // (kRows, D), pre-scaled
  bf16* k_s = reinterpret_cast<bf16*>(smem + TileBytes<D>());      // (kTile, D)
  bf16* v_s = reinterpret_cast<bf16*>(smem + 2 * TileBytes<D>());  // (kTile, D)
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr size_t kWarpBytes = kScoreBytes + kProbBytes + AccBytes<D>();
  unsigned char* mine = smem + 3 * TileBytes<D>() + warp * kWarpBytes;
  float* s_w = reinterpret_cast<float*>(mine);                          // (16, kTile)
  bf16* p_w = reinterpret_cast<bf16*>(mine + kScoreBytes);              // (16, kTile)
  float* o_w = reinterpret_cast<float*>(mine + kScoreBytes + kProbBytes);  // (16, D)

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  // Heavy tiles (late queries see more keys) start first.
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  // Lanes 2r and 2r + 1 own row r of the warp's 16, columns [half·kHalf, …).
  const int row = lane / 2, half = lane % 2;
  const int warp_first = q0 + warp * kFrag;
  const int warp_last = min(warp_first + kFrag, g.time) - 1;
  const int tq = warp_first + row;

  LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0, g.time, g.scale,
              q_s);
  for (int i = lane; i < kFrag * AccStride<D>(); i += kWarpSize) o_w[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  const int kv_end = min(g.time, q0 + kRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and q_s is written)
    LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, k0, g.time, 1.0f, k_s);
    LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, k0, g.time, 1.0f, v_s);
    __syncthreads();
    if (warp_first >= g.time || k0 > warp_last) continue;  // warp-uniform: nothing visible

    ProductWithTransposed<D>(q_s + warp * kFrag * TileStride<D>(), k_s, s_w);
    __syncwarp();

    // Online softmax of row `row` over this tile's visible keys.
    const float* s_row = s_w + row * kScoreStride + half * kHalf;
    const int key0 = k0 + half * kHalf;
    float tile_max = -INFINITY;
    for (int c = 0; c < kHalf; ++c) {
      if (key0 + c <= tq && tq < g.time) tile_max = fmaxf(tile_max, s_row[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    // A row that has seen no key (only rows beyond T) adds nothing.
    const bool live = m_new != -INFINITY;
    const float correction = live ? Exp(m - m_new) : 1.0f;  // 0 on a row's first keys
    bf16* p_row = p_w + row * kProbStride + half * kHalf;
    float sum = 0.0f;
    for (int c = 0; c < kHalf; ++c) {
      const bf16 p = __float2bfloat16_rn(live && key0 + c <= tq ? Exp(s_row[c] - m_new) : 0.0f);
      p_row[c] = p;
      // The rounded weights, so that each output row is exactly a weighted
      // mean of the value rows the tensor cores add.
      sum += __bfloat162float(p);
    }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    l = l * correction + sum;
    m = m_new;
    float* o_row = o_w + row * AccStride<D>() + half * (D / 2);
    for (int d = 0; d < D / 2; ++d) o_row[d] *= correction;
    __syncwarp();

    // O (16, D) += P (16, kTile) · V (kTile, D), through the f32 accumulator.
    FragC acc[D / kFrag];
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n) {
      wmma::load_matrix_sync(acc[n], o_w + n * kFrag, AccStride<D>(), wmma::mem_row_major);
    }
    AccumulateProduct<D>(p_w, v_s, acc);
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n) {
      wmma::store_matrix_sync(o_w + n * kFrag, acc[n], AccStride<D>(), wmma::mem_row_major);
    }
    __syncwarp();
  }

  __syncwarp();
  if (tq < g.time) {
    const float* o_row = o_w + row * AccStride<D>() + half * (D / 2);
    FinishOnlineSoftmax<D / 2>(m, l, [&](int d) { return o_row[d]; }, out,
                               OutOffset<D>(g, b, tq, h) + half * (D / 2), 1, lse,
                               static_cast<int64_t>(bh) * g.time + tq, half == 0);
  }
}

// --------------------------------------------------------------- backward

template <int D>
constexpr size_t BackwardQuerySmemBytes() {
  // q, dO, k, v tiles; per warp: S, dP (reused for dQ at the end), dS.
  static_assert(AccBytes<D>() <= 2 * kScoreBytes, "dQ reuses the S and dP buffers");
  return 4 * TileBytes<D>() + kWarps * (2 * kScoreBytes + kProbBytes);
}

// grad_qkv's q part += scale·dS·K for a tile of kRows queries.
// grid: (B·H, query tiles), block: kThreads, smem BackwardQuerySmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionBackwardQueryBf16Kernel(ActIn qkv, const float* lse, const float* delta,
                                     ActIn grad_out, ActOut grad_qkv, Geometry g) {
  SMALLEM_DYNAMIC_SHARED(unsigned char, smem, 128);
  bf16* q_s = reinterpret_cast<bf16*>(smem);                        // (kRows, D), pre-scaled
  bf16* do_s = reinterpret_cast<bf16*>(smem + TileBytes<D>());      // (kRows, D)
  bf16* k_s = reinterpret_cast<bf16*>(smem + 2 * TileBytes<D>());   // (kTile, D)
  bf16* v_s = reinterpret_cast<bf16*>(smem + 3 * TileBytes<D>());   // (kTile, D)
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  unsigned char* mine = smem + 4 * TileBytes<D>() + warp * (2 * kScoreBytes + kProbBytes);
  float* s_w = reinterpret_cast<float*>(mine);                      // (16, kTile)
  float* dp_w = reinterpret_cast<float*>(mine + kScoreBytes);       // (16, kTile)
  bf16* ds_w = reinterpret_cast<bf16*>(mine + 2 * kScoreBytes);     // (16, kTile)

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  const int row = lane / 2, half = lane % 2;
  const int warp_first = q0 + warp * kFrag;
  const int warp_last = min(warp_first + kFrag, g.time) - 1;
  const int tq = warp_first + row;
  const int64_t stat = static_cast<int64_t>(bh) * g.time + min(tq, g.time - 1);
  const float row_lse = lse[stat], row_delta = delta[stat];

  LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0, g.time, g.scale,
              q_s);
  LoadTile<D>(grad_out, [&](int t) { return OutOffset<D>(g, b, t, h); }, q0, g.time, 1.0f,
              do_s);
  FragC dq[D / kFrag];
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) wmma::fill_fragment(dq[n], 0.0f);

  const int kv_end = min(g.time, q0 + kRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, k0, g.time, 1.0f, k_s);
    LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, k0, g.time, 1.0f, v_s);
    __syncthreads();
    if (warp_first >= g.time || k0 > warp_last) continue;  // warp-uniform

    ProductWithTransposed<D>(q_s + warp * kFrag * TileStride<D>(), k_s, s_w);    // S
    ProductWithTransposed<D>(do_s + warp * kFrag * TileStride<D>(), v_s, dp_w);  // dP
    __syncwarp();
    const int key0 = k0 + half * kHalf;
    for (int c = 0; c < kHalf; ++c) {
      const int i = row * kScoreStride + half * kHalf + c;
      float ds = 0.0f;
      if (key0 + c <= tq && tq < g.time) {
        const float p = Exp(s_w[i] - row_lse);
        ds = p * (dp_w[i] - row_delta);
      }
      ds_w[row * kProbStride + half * kHalf + c] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    AccumulateProduct<D>(ds_w, k_s, dq);  // dQ/scale += dS · K
  }

  __syncwarp();
  // The S and dP buffers stage dQ.
  AddAccumulator<D>(dq, s_w, tq < g.time, grad_qkv,
                    [&](int r) { return QkvOffset<D>(g, b, warp_first + r, h, 0); }, g.scale);
}

template <int D>
constexpr size_t BackwardKeySmemBytes() {
  // k, v, q, dO tiles; per warp: Sᵀ, dPᵀ (reused for dK and dV at the end),
  // Pᵀ, dSᵀ; then lse and delta of the query tile.
  static_assert(AccBytes<D>() <= 2 * kScoreBytes, "dK and dV reuse the Sᵀ and dPᵀ buffers");
  return 4 * TileBytes<D>() + kWarps * (2 * kScoreBytes + 2 * kProbBytes) +
         2 * sizeof(float) * kTile;
}

// grad_qkv's k part += dSᵀ·(scale·Q) and v part += Pᵀ·dO for a tile of kRows
// keys, walking the query tiles at and after it.
// grid: (B·H, key tiles), block: kThreads, smem BackwardKeySmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionBackwardKeyBf16Kernel(ActIn qkv, const float* lse, const float* delta,
                                   ActIn grad_out, ActOut grad_qkv, Geometry g) {
  SMALLEM_DYNAMIC_SHARED(unsigned char, smem, 128);
  bf16* k_s = reinterpret_cast<bf16*>(smem);                        // (kRows, D)
  bf16* v_s = reinterpret_cast<bf16*>(smem + TileBytes<D>());       // (kRows, D)
  bf16* q_s = reinterpret_cast<bf16*>(smem + 2 * TileBytes<D>());   // (kTile, D), pre-scaled
  bf16* do_s = reinterpret_cast<bf16*>(smem + 3 * TileBytes<D>());  // (kTile, D)
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr size_t kWarpBytes = 2 * kScoreBytes + 2 * kProbBytes;
  unsigned char* mine = smem + 4 * TileBytes<D>() + warp * kWarpBytes;
  float* st_w = reinterpret_cast<float*>(mine);                          // (16 keys, kTile)
  float* dpt_w = reinterpret_cast<float*>(mine + kScoreBytes);           // (16 keys, kTile)
  bf16* pt_w = reinterpret_cast<bf16*>(mine + 2 * kScoreBytes);          // (16 keys, kTile)
  bf16* dst_w = reinterpret_cast<bf16*>(mine + 2 * kScoreBytes + kProbBytes);
  float* lse_s = reinterpret_cast<float*>(smem + 4 * TileBytes<D>() + kWarps * kWarpBytes);
  float* delta_s = lse_s + kTile;

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  // Early keys are seen by more queries: they are the heavy tiles.
  const int key0 = blockIdx.y * kRows;
  const int row = lane / 2, half = lane % 2;
  const int warp_first = key0 + warp * kFrag;
  const int tk = warp_first + row;

  LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, key0, g.time, 1.0f, k_s);
  LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, key0, g.time, 1.0f, v_s);
  FragC dk[D / kFrag], dv[D / kFrag];
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }

  const int64_t stat_base = static_cast<int64_t>(bh) * g.time;
  for (int q0 = key0; q0 < g.time; q0 += kTile) {
    __syncthreads();
    LoadTile<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0, g.time, g.scale,
                q_s);
    LoadTile<D>(grad_out, [&](int t) { return OutOffset<D>(g, b, t, h); }, q0, g.time, 1.0f,
                do_s);
    if (threadIdx.x < kTile) {
      const int t = q0 + threadIdx.x;
      lse_s[threadIdx.x] = t < g.time ? lse[stat_base + t] : 0.0f;
      delta_s[threadIdx.x] = t < g.time ? delta[stat_base + t] : 0.0f;
    }
    __syncthreads();
    if (warp_first >= g.time) continue;  // warp-uniform: keys beyond T

    ProductWithTransposed<D>(k_s + warp * kFrag * TileStride<D>(), q_s, st_w);    // Sᵀ
    ProductWithTransposed<D>(v_s + warp * kFrag * TileStride<D>(), do_s, dpt_w);  // dPᵀ
    __syncwarp();
    const int query0 = q0 + half * kHalf;
    for (int c = 0; c < kHalf; ++c) {
      const int j = half * kHalf + c;  // the query's column in the tile
      const int i = row * kScoreStride + j;
      float p = 0.0f, ds = 0.0f;
      if (query0 + c >= tk && query0 + c < g.time && tk < g.time) {
        p = Exp(st_w[i] - lse_s[j]);
        ds = p * (dpt_w[i] - delta_s[j]);
      }
      pt_w[row * kProbStride + j] = __float2bfloat16_rn(p);
      dst_w[row * kProbStride + j] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    AccumulateProduct<D>(pt_w, do_s, dv);   // dV += Pᵀ · dO
    AccumulateProduct<D>(dst_w, q_s, dk);   // dK += dSᵀ · (scale·Q)
  }

  __syncwarp();
  // The Sᵀ and dPᵀ buffers stage dK, then dV.
  AddAccumulator<D>(dk, st_w, tk < g.time, grad_qkv,
                    [&](int r) { return QkvOffset<D>(g, b, warp_first + r, h, 1); }, 1.0f);
  AddAccumulator<D>(dv, st_w, tk < g.time, grad_qkv,
                    [&](int r) { return QkvOffset<D>(g, b, warp_first + r, h, 2); }, 1.0f);
}

// ---------------------------------------------------------------- launch

// Kernels needing more than the default 48 KiB of dynamic shared memory
// must opt in, per kernel.
template <typename Kernel>
cudaError_t AllowSmem(Kernel kernel, size_t bytes) {
  return AllowDynamicSmem(reinterpret_cast<const void*>(kernel), bytes);
}

Geometry GeometryOf(const AttentionShape& s) {
  return Geometry{static_cast<int>(s.time), static_cast<int>(s.heads), s.heads * s.head_dim,
                  1.0f / std::sqrt(static_cast<float>(s.head_dim))};
}

bool ValidShape(const AttentionShape& s) {
  return s.batch > 0 && s.time > 0 && s.heads > 0 && AttentionSupportsHeadDim(s.head_dim) &&
         s.time < (int64_t{1} << 30) && s.batch * s.heads < (int64_t{1} << 31) &&
         (s.time + kRows - 1) / kRows <= 65535;
}

// The vector loads of LoadTile need 16-byte aligned bf16 sources.
bool LoadsAligned(ActIn x) {
  return !x.bf16 || reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
}

dim3 GridOf(const AttentionShape& s) {
  return dim3(static_cast<unsigned>(s.batch * s.heads),
              static_cast<unsigned>((s.time + kRows - 1) / kRows));
}

template <int D>
cudaError_t Forward(ActIn qkv, ActOut out, float* lse, const AttentionShape& s,
                    cudaStream_t stream) {
  constexpr size_t smem = ForwardSmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionForwardBf16Kernel<D>, smem); e != cudaSuccess) return e;
  SMALLEM_LAUNCH(AttentionForwardBf16Kernel<D>, GridOf(s), kThreads, smem, stream)(qkv, out, lse,
                                                                      GeometryOf(s));
  return cudaGetLastError();
}

template <int D>
cudaError_t Backward(ActIn qkv, ActIn out, const float* lse, ActIn grad_out, ActOut grad_qkv,
                     const AttentionShape& s, float* delta, cudaStream_t stream) {
  const Geometry g = GeometryOf(s);
  if (cudaError_t e = LaunchAttentionDelta(out, grad_out, delta, s, stream); e != cudaSuccess) {
    return e;
  }

  constexpr size_t query_smem = BackwardQuerySmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionBackwardQueryBf16Kernel<D>, query_smem);
      e != cudaSuccess) {
    return e;
  }
  SMALLEM_LAUNCH(AttentionBackwardQueryBf16Kernel<D>, GridOf(s), kThreads, query_smem, stream)(
      qkv, lse, delta, grad_out, grad_qkv, g);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

  constexpr size_t key_smem = BackwardKeySmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionBackwardKeyBf16Kernel<D>, key_smem); e != cudaSuccess) {
    return e;
  }
  SMALLEM_LAUNCH(AttentionBackwardKeyBf16Kernel<D>, GridOf(s), kThreads, key_smem, stream)(
      qkv, lse, delta, grad_out, grad_qkv, g);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAttentionForwardBf16(ActIn qkv, ActOut out, float* lse,
                                       const AttentionShape& shape, cudaStream_t stream) {
  if (!ValidShape(shape)) return cudaErrorInvalidValue;
  if (!LoadsAligned(qkv)) return cudaErrorMisalignedAddress;
  return WithHeadDim(shape.head_dim, [&](auto d) {
    return Forward<decltype(d)::value>(qkv, out, lse, shape, stream);
  });
}

cudaError_t LaunchAttentionBackwardBf16(ActIn qkv, ActIn out, const float* lse,
                                        ActIn grad_out, ActOut grad_qkv,
                                        const AttentionShape& shape, float* scratch,
                                        cudaStream_t stream) {
  if (grad_qkv.data == nullptr) return cudaSuccess;
  if (!ValidShape(shape)) return cudaErrorInvalidValue;
  if (!LoadsAligned(qkv) || !LoadsAligned(grad_out)) return cudaErrorMisalignedAddress;
  return WithHeadDim(shape.head_dim, [&](auto d) {
    return Backward<decltype(d)::value>(qkv, out, lse, grad_out, grad_qkv, shape, scratch,
                                        stream);
  });
}

}  // namespace smallem::cuda
