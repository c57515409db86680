// Causal multi-head attention from packed qkv, flash-style, in f32.
//
// Forward: a block takes kRows query rows of one (batch, head) pair and
// walks the key/value tiles of kTile rows up to its last query, keeping an
// online softmax (running max m and sum l) and the output accumulator in
// registers. Each warp owns kRowsPerWarp query rows; for a key tile, lane j
// scores key j, and the warp then adds p_j·v_j with lane d holding output
// channels d, d+32, ... . No T × T matrix exists anywhere; lse = m + log l
// is saved for the backward.
//
// Backward (recomputing P = exp(S − lse)):
//   delta = rowsum(dO ∘ O),  dP = dO·Vᵀ,  dS = P ∘ (dP − delta),
//   dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Pᵀ·dO.
// Two kernels: one per query tile computes dQ (walking key tiles), one per
// key tile computes dK and dV (walking query tiles). Every gradient element
// is summed by one thread in a fixed order — deterministic, no atomics —
// at the price of computing S and dP twice.
//
// Scores are computed identically in all three kernels (q pre-scaled by
// 1/√D as it is loaded, the same dot product), so P in the backward is
// exactly the forward's.
//
// Activations (qkv, out, grad_out, grad_qkv) may each be f32 or bf16: tiles
// are widened to f32 as they are loaded into shared memory (one branch per
// tile, not per element), out is rounded once as it is stored, and a bf16
// gradient accumulates as bf16(f32(grad) + sum). The math is f32 throughout.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/activation.cuh"
#include "kernels/attention_common.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRowsPerWarp = 4;
// Rows a block owns (queries in forward and dQ, keys in dK/dV).
constexpr int kRows = kWarps * kRowsPerWarp;
// Rows of the tiles a block walks (one per lane).
constexpr int kTile = kWarpSize;

// Padded row length of tiles read one row per lane: 16-byte reads of eight
// consecutive lanes then fall in distinct banks.
template <int D>
__host__ __device__ constexpr int Padded() {
  return D + 4;
}

struct Geometry {
  int time, heads;
  int64_t channels;  // C = H·D
  float scale;       // 1/√D
};

// Element offset of head h's slice of part (0 q, 1 k, 2 v) at (b, t) in qkv.
template <int D>
__device__ __forceinline__ int64_t QkvOffset(const Geometry& g, int b, int t,
                                             int h, int part) {
  return (static_cast<int64_t>(b) * g.time + t) * 3 * g.channels +
         part * g.channels + static_cast<int64_t>(h) * D;
}

// Offset of head h at (b, t) in a (B, T, C) tensor.
template <int D>
__device__ __forceinline__ int64_t OutOffset(const Geometry& g, int b, int t, int h) {
  return (static_cast<int64_t>(b) * g.time + t) * g.channels +
         static_cast<int64_t>(h) * D;
}

// a·b over D floats of shared memory, both 16-byte aligned. Four partial
// sums in a fixed order: the same bits wherever it is called.
template <int D>
__device__ __forceinline__ float Dot(const float* a, const float* b) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
  for (int d = 0; d < D; d += 4) {
    const float4 x = *reinterpret_cast<const float4*>(a + d);
    const float4 y = *reinterpret_cast<const float4*>(b + d);
    s0 = fmaf(x.x, y.x, s0);
    s1 = fmaf(x.y, y.y, s1);
    s2 = fmaf(x.z, y.z, s2);
    s3 = fmaf(x.w, y.w, s3);
  }
  return (s0 + s1) + (s2 + s3);
}

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

// Copies `rows` rows of D elements (f32 or bf16) starting at time t0 into
// dst as f32 (row stride dst_stride), each times `factor`; rows at or beyond
// T are zero so that masked lanes never read garbage. src_offset(t) gives
// each row's offset.
template <int D, typename T, typename Offset>
__device__ __forceinline__ void LoadRows(const T* src, Offset src_offset,
                                         int t0, int rows, int time,
                                         float factor, float* dst,
                                         int dst_stride) {
  for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int t = t0 + r;
    dst[r * dst_stride + d] = t < time ? ToFloat(src[src_offset(t) + d]) * factor : 0.0f;
  }
}

// LoadRows from an activation of either type: the branch is the block's,
// once per tile.
template <int D, typename Offset>
__device__ __forceinline__ void LoadRows(ActIn src, Offset src_offset, int t0, int rows,
                                         int time, float factor, float* dst, int dst_stride) {
  if (src.bf16) {
    LoadRows<D>(static_cast<const __nv_bfloat16*>(src.data), src_offset, t0, rows, time,
                factor, dst, dst_stride);
  } else {
    LoadRows<D>(static_cast<const float*>(src.data), src_offset, t0, rows, time, factor, dst,
                dst_stride);
  }
}

// ---------------------------------------------------------------- forward

template <int D>
constexpr size_t ForwardSmemBytes() {
  // q (kRows, D), k (kTile, padded), v (kTile, D)
  return sizeof(float) * (kRows * D + kTile * Padded<D>() + kTile * D);
}

// qkv: (B, T, 3C); out: (B, T, C); lse: (B, H, T) or null.
// grid: (B·H, query tiles), block: kThreads, dynamic smem ForwardSmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionForwardKernel(ActIn qkv, ActOut out, float* lse, Geometry g) {
  constexpr int kLanesD = D / kWarpSize;  // output channels per lane
  SMALLEM_DYNAMIC_SHARED(float, smem, 16);
  float* q_s = smem;                       // (kRows, D), pre-scaled
  float* k_s = q_s + kRows * D;            // (kTile, Padded<D>)
  float* v_s = k_s + kTile * Padded<D>();  // (kTile, D)

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  // Heavy tiles (late queries see more keys) start first.
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0,
              kRows, g.time, g.scale, q_s, D);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kLanesD];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kLanesD; ++c) acc[i][c] = 0.0f;
  }

  const int kv_end = min(g.time, q0 + kRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and q_s is written)
    LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, k0,
                kTile, g.time, 1.0f, k_s, Padded<D>());
    LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, k0,
                kTile, g.time, 1.0f, v_s, D);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      const int tq = q0 + r;
      if (tq >= g.time || k0 > tq) continue;  // warp-uniform
      const int key = k0 + lane;
      const bool visible = key <= tq;
      const float s = visible ? Dot<D>(q_s + r * D, k_s + lane * Padded<D>()) : -INFINITY;
      // Key k0 is visible, so the tile's max and m_new are finite.
      const float m_new = fmaxf(m[i], WarpMax(s));
      const float p = visible ? expf(s - m_new) : 0.0f;
      const float correction = expf(m[i] - m_new);  // 0 on the first tile
      l[i] = l[i] * correction + WarpSum(p);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < kLanesD; ++c) acc[i][c] *= correction;
      const int visible_keys = min(kTile, tq - k0 + 1);
      for (int j = 0; j < visible_keys; ++j) {
        const float p_j = __shfl_sync(kFullMask, p, j);
#pragma unroll
        for (int c = 0; c < kLanesD; ++c) {
          acc[i][c] = fmaf(p_j, v_s[j * D + lane + c * kWarpSize], acc[i][c]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int tq = q0 + warp * kRowsPerWarp + i;
    if (tq >= g.time) continue;
    FinishOnlineSoftmax<kLanesD>(m[i], l[i], [&](int c) { return acc[i][c]; }, out,
                                 OutOffset<D>(g, b, tq, h) + lane, kWarpSize, lse,
                                 static_cast<int64_t>(bh) * g.time + tq, lane == 0);
  }
}

// --------------------------------------------------------------- backward

template <int D>
constexpr size_t BackwardQuerySmemBytes() {
  // q, dO (kRows, D); k, v (kTile, padded)
  return sizeof(float) * (2 * kRows * D + 2 * kTile * Padded<D>());
}

// grad_qkv's q part += scale·dS·K for a tile of kRows queries.
// grid: (B·H, query tiles), block: kThreads, smem BackwardQuerySmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionBackwardQueryKernel(ActIn qkv, const float* lse, const float* delta,
                                 ActIn grad_out, ActOut grad_qkv, Geometry g) {
  constexpr int kLanesD = D / kWarpSize;
  SMALLEM_DYNAMIC_SHARED(float, smem, 16);
  float* q_s = smem;                        // (kRows, D), pre-scaled
  float* do_s = q_s + kRows * D;            // (kRows, D)
  float* k_s = do_s + kRows * D;            // (kTile, Padded<D>)
  float* v_s = k_s + kTile * Padded<D>();   // (kTile, Padded<D>)

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0,
              kRows, g.time, g.scale, q_s, D);
  LoadRows<D>(grad_out, [&](int t) { return OutOffset<D>(g, b, t, h); }, q0,
              kRows, g.time, 1.0f, do_s, D);

  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp], dq[kRowsPerWarp][kLanesD];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int tq = q0 + warp * kRowsPerWarp + i;
    const int64_t index = static_cast<int64_t>(bh) * g.time + min(tq, g.time - 1);
    row_lse[i] = lse[index];
    row_delta[i] = delta[index];
#pragma unroll
    for (int c = 0; c < kLanesD; ++c) dq[i][c] = 0.0f;
  }

  const int kv_end = min(g.time, q0 + kRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, k0,
                kTile, g.time, 1.0f, k_s, Padded<D>());
    LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, k0,
                kTile, g.time, 1.0f, v_s, Padded<D>());
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      const int tq = q0 + r;
      if (tq >= g.time || k0 > tq) continue;  // warp-uniform
      const bool visible = k0 + lane <= tq;
      float ds = 0.0f;
      if (visible) {
        const float s = Dot<D>(q_s + r * D, k_s + lane * Padded<D>());
        const float p = expf(s - row_lse[i]);
        const float dp = Dot<D>(do_s + r * D, v_s + lane * Padded<D>());
        ds = p * (dp - row_delta[i]);
      }
      const int visible_keys = min(kTile, tq - k0 + 1);
      for (int j = 0; j < visible_keys; ++j) {
        const float ds_j = __shfl_sync(kFullMask, ds, j);
#pragma unroll
        for (int c = 0; c < kLanesD; ++c) {
          dq[i][c] = fmaf(ds_j, k_s[j * Padded<D>() + lane + c * kWarpSize], dq[i][c]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int tq = q0 + warp * kRowsPerWarp + i;
    if (tq >= g.time) continue;
    const int64_t offset = QkvOffset<D>(g, b, tq, h, 0);
    if (grad_qkv.bf16) {
#pragma unroll
      for (int c = 0; c < kLanesD; ++c) {
        Accumulate(grad_qkv, offset + lane + c * kWarpSize, g.scale * dq[i][c]);
      }
      continue;
    }
    float* dst = static_cast<float*>(grad_qkv.data) + offset;
#pragma unroll
    for (int c = 0; c < kLanesD; ++c) dst[lane + c * kWarpSize] += g.scale * dq[i][c];
  }
}

template <int D>
constexpr size_t BackwardKeySmemBytes() {
  // k, v (kRows, D); q, dO (kTile, padded); lse, delta (kTile)
  return sizeof(float) * (2 * kRows * D + 2 * kTile * Padded<D>() + 2 * kTile);
}

// grad_qkv's k part += dSᵀ·(scale·Q) and v part += Pᵀ·dO for a tile of kRows
// keys, walking the query tiles at and after it.
// grid: (B·H, key tiles), block: kThreads, smem BackwardKeySmemBytes.
template <int D>
__global__ void __launch_bounds__(kThreads)
    AttentionBackwardKeyKernel(ActIn qkv, const float* lse, const float* delta,
                               ActIn grad_out, ActOut grad_qkv, Geometry g) {
  constexpr int kLanesD = D / kWarpSize;
  SMALLEM_DYNAMIC_SHARED(float, smem, 16);
  float* k_s = smem;                        // (kRows, D)
  float* v_s = k_s + kRows * D;             // (kRows, D)
  float* q_s = v_s + kRows * D;             // (kTile, Padded<D>), pre-scaled
  float* do_s = q_s + kTile * Padded<D>();  // (kTile, Padded<D>)
  float* lse_s = do_s + kTile * Padded<D>();  // (kTile)
  float* delta_s = lse_s + kTile;             // (kTile)

  const int bh = blockIdx.x;
  const int b = bh / g.heads, h = bh % g.heads;
  // Early keys are seen by more queries: they are the heavy tiles.
  const int key0 = blockIdx.y * kRows;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 1); }, key0,
              kRows, g.time, 1.0f, k_s, D);
  LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 2); }, key0,
              kRows, g.time, 1.0f, v_s, D);

  float dk[kRowsPerWarp][kLanesD], dv[kRowsPerWarp][kLanesD];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
#pragma unroll
    for (int c = 0; c < kLanesD; ++c) {
      dk[i][c] = 0.0f;
      dv[i][c] = 0.0f;
    }
  }

  const int64_t row_base = static_cast<int64_t>(bh) * g.time;
  for (int q0 = key0 / kTile * kTile; q0 < g.time; q0 += kTile) {
    __syncthreads();
    LoadRows<D>(qkv, [&](int t) { return QkvOffset<D>(g, b, t, h, 0); }, q0,
                kTile, g.time, g.scale, q_s, Padded<D>());
    LoadRows<D>(grad_out, [&](int t) { return OutOffset<D>(g, b, t, h); }, q0,
                kTile, g.time, 1.0f, do_s, Padded<D>());
    if (threadIdx.x < kTile) {
      const int t = q0 + threadIdx.x;
      lse_s[threadIdx.x] = t < g.time ? lse[row_base + t] : 0.0f;
      delta_s[threadIdx.x] = t < g.time ? delta[row_base + t] : 0.0f;
    }
    __syncthreads();
    const int tq = q0 + lane;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      const int tk = key0 + r;
      // Keys beyond T, and tiles wholly before the key, add nothing.
      if (tk >= g.time || q0 + kTile <= tk) continue;  // warp-uniform
      const bool visible = tq >= tk && tq < g.time;
      float p = 0.0f, ds = 0.0f;
      if (visible) {
        const float s = Dot<D>(q_s + lane * Padded<D>(), k_s + r * D);
        p = expf(s - lse_s[lane]);
        const float dp = Dot<D>(do_s + lane * Padded<D>(), v_s + r * D);
        ds = p * (dp - delta_s[lane]);
      }
      // Queries in [first, last) of the tile see this key.
      const int first = max(0, tk - q0);
      const int last = min(kTile, g.time - q0);
      for (int j = first; j < last; ++j) {
        const float p_j = __shfl_sync(kFullMask, p, j);
        const float ds_j = __shfl_sync(kFullMask, ds, j);
#pragma unroll
        for (int c = 0; c < kLanesD; ++c) {
          const int d = lane + c * kWarpSize;
          dv[i][c] = fmaf(p_j, do_s[j * Padded<D>() + d], dv[i][c]);
          dk[i][c] = fmaf(ds_j, q_s[j * Padded<D>() + d], dk[i][c]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int tk = key0 + warp * kRowsPerWarp + i;
    if (tk >= g.time) continue;
    // q was pre-scaled, so dk already carries the 1/√D of S.
    const int64_t dk_offset = QkvOffset<D>(g, b, tk, h, 1) + lane;
    const int64_t dv_offset = QkvOffset<D>(g, b, tk, h, 2) + lane;
#pragma unroll
    for (int c = 0; c < kLanesD; ++c) {
      Accumulate(grad_qkv, dk_offset + c * kWarpSize, dk[i][c]);
      Accumulate(grad_qkv, dv_offset + c * kWarpSize, dv[i][c]);
    }
  }
}

// ---------------------------------------------------------------- launch

// Kernels needing more than the default 48 KiB of dynamic shared memory
// must opt in, per kernel.
template <typename Kernel>
cudaError_t AllowSmem(Kernel kernel, size_t bytes) {
  return AllowDynamicSmem(reinterpret_cast<const void*>(kernel), bytes);
}

Geometry GeometryOf(const AttentionShape& s) {
  return Geometry{static_cast<int>(s.time), static_cast<int>(s.heads),
                  s.heads * s.head_dim,
                  1.0f / std::sqrt(static_cast<float>(s.head_dim))};
}

bool ValidShape(const AttentionShape& s) {
  return s.batch > 0 && s.time > 0 && s.heads > 0 &&
         AttentionSupportsHeadDim(s.head_dim) && s.time < (int64_t{1} << 30) &&
         s.batch * s.heads < (int64_t{1} << 31) && (s.time + kRows - 1) / kRows <= 65535;
}

template <int D>
cudaError_t Forward(ActIn qkv, ActOut out, float* lse, const AttentionShape& s,
                    cudaStream_t stream) {
  constexpr size_t smem = ForwardSmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionForwardKernel<D>, smem); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.time + kRows - 1) / kRows));
  SMALLEM_LAUNCH(AttentionForwardKernel<D>, grid, kThreads, smem, stream)(qkv, out, lse, GeometryOf(s));
  return cudaGetLastError();
}

template <int D>
cudaError_t Backward(ActIn qkv, ActIn out, const float* lse, ActIn grad_out, ActOut grad_qkv,
                     const AttentionShape& s, float* delta, cudaStream_t stream) {
  const Geometry g = GeometryOf(s);
  if (cudaError_t e = LaunchAttentionDelta(out, grad_out, delta, s, stream); e != cudaSuccess) {
    return e;
  }

  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.time + kRows - 1) / kRows));
  constexpr size_t query_smem = BackwardQuerySmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionBackwardQueryKernel<D>, query_smem);
      e != cudaSuccess) {
    return e;
  }
  SMALLEM_LAUNCH(AttentionBackwardQueryKernel<D>, grid, kThreads, query_smem, stream)(
      qkv, lse, delta, grad_out, grad_qkv, g);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

  constexpr size_t key_smem = BackwardKeySmemBytes<D>();
  if (cudaError_t e = AllowSmem(AttentionBackwardKeyKernel<D>, key_smem); e != cudaSuccess) {
    return e;
  }
  SMALLEM_LAUNCH(AttentionBackwardKeyKernel<D>, grid, kThreads, key_smem, stream)(
      qkv, lse, delta, grad_out, grad_qkv, g);
  return cudaGetLastError();
}

}  // namespace

bool AttentionSupportsHeadDim(int64_t head_dim) {
  for (int d : kAttentionHeadDims) {
    if (head_dim == d) return true;
  }
  return false;
}

cudaError_t LaunchAttentionForward(ActIn qkv, ActOut out, float* lse,
                                   const AttentionShape& shape, cudaStream_t stream) {
  if (!ValidShape(shape)) return cudaErrorInvalidValue;
  return WithHeadDim(shape.head_dim, [&](auto d) {
    return Forward<decltype(d)::value>(qkv, out, lse, shape, stream);
  });
}

size_t AttentionBackwardScratchFloats(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.heads * shape.time);
}

cudaError_t LaunchAttentionBackward(ActIn qkv, ActIn out, const float* lse, ActIn grad_out,
                                    ActOut grad_qkv, const AttentionShape& shape,
                                    float* scratch, cudaStream_t stream) {
  if (grad_qkv.data == nullptr) return cudaSuccess;
  if (!ValidShape(shape)) return cudaErrorInvalidValue;
  return WithHeadDim(shape.head_dim, [&](auto d) {
    return Backward<decltype(d)::value>(qkv, out, lse, grad_out, grad_qkv, shape, scratch,
                                        stream);
  });
}

}  // namespace smallem::cuda
