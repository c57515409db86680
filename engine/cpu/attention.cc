// Causal multi-head attention from packed qkv on BLAS products, one (batch,
// head) pair per task: the path of builds without Highway (the GPU
// machine's) and of a CpuBackend whose options ask for it (SMALLEM_ATTENTION=blas
// at the binaries' edge); builds with Highway otherwise run
// engine/cpu/attention_tiles.cc's register tiles instead, 1.3–1.4× faster
// in the step. Queries are taken in blocks of kBlock rows; a block only
// ever sees the keys at or before its last row, so the products are GEMMs on a
// kBlock × r1 tile (r1 the block's end): the blocks above the diagonal are
// never computed (at T = 128, 62.5 % of the full T × T products). Softmax's
// exp and sums are vector_math.h's; each row of P is normalized before P·V.
//
// Given p.probs (the autograd does so where CpuBackend::SavesAttentionProbs
// allows, up to 32 MiB a call), the forward builds each block's P in the
// pair's T × T slice of it instead of scratch, and leaves it there: row t
// holds P over keys [0, t] and zeros up to its block's end; nothing beyond
// is written. Without it the block's tile is scratch and nothing is kept.
//
// Backward, per block of keys [c0, c1), on query-major tiles (the queries
// [c0, T) that see those keys as rows). P's tile is the saved one where the
// forward kept it — the key blocks align with the forward's query blocks, so
// the tile's entries above the diagonal are the zeros written there — and is
// otherwise recomputed as exp(S − lse) from the saved lse:
//   P = exp(scale·Q·Kᵀ − lse),  dP = dO·Vᵀ,  dS = P ∘ (dP − rowsum(dO ∘ O)),
//   dV += Pᵀ·dO,  dK += scale·dSᵀ·Q,  dQ += scale·dS·K.
// Key block [c0, c1) is the only one to write rows [c0, c1) of dK and dV,
// and the first block (c0 = 0) reaches every row of dQ: with p.overwrite
// those products write (β = 0) instead of adding, and grad_qkv's prior
// contents are never read.
// Every product is untransposed or has a transposed first operand (Kᵀ and Vᵀ
// are copied once per pair): OpenBLAS 0.3.21 runs both through its
// small-matrix kernels at these sizes, but sends a transposed second operand
// through its packing path, several times slower.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/cpu/attention_tiles.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/transpose.h"
#include "engine/cpu/vector_math.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

// Rows per query block: small enough to skip most of the masked half, large
// enough that each product still runs near sgemm speed (head_dim columns).
constexpr int64_t kBlock = 32;

struct AttentionLayout {
  int64_t b, t, h, d, c;
  float scale;
  cpu::GemmChoice gemm;  // the backend's
};

AttentionLayout LayoutOf(int64_t batch, int64_t time, int64_t heads, int64_t head_dim,
                         cpu::GemmChoice gemm) {
  return {batch,
          time,
          heads,
          head_dim,
          heads * head_dim,
          1.0f / std::sqrt(static_cast<float>(head_dim)),
          gemm};
}

// Whether the tiles' layout of the kept softmax fits a (B, H, T, T) buffer
// (T ≥ 48 at 16 lanes); where it does not they recompute it.
bool TilesFitProbs(int64_t time) {
#ifdef SMALLEM_HAVE_HWY
  return cpu::TiledAttentionPairProbs(time) <= time * time;
#else
  return false;
#endif
}

// scores[i, j] = scale·q[r0 + i]·k[j] for the block's rows and keys [0, r1),
// from kt = Kᵀ (head_dim, T).
void BlockScores(const AttentionLayout& l, const float* q, const float* kt,
                 int64_t r0, int64_t r1, float* scores) {
  cpu::Gemm(l.gemm, false, false, r1 - r0, r1, l.d, l.scale, q + r0 * 3 * l.c, 3 * l.c, kt, l.t,
            0.0f, scores, l.t);
}

}  // namespace

bool CpuBackend::SavesAttentionProbs(int64_t batch, int64_t heads, int64_t time) const {
  if (batch * heads * time * time * int64_t{sizeof(float)} > (int64_t{32} << 20)) return false;
  return !tiles_ || TilesFitProbs(time);
}

void CpuBackend::AttentionForward(const AttentionParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::AttentionForward)) return;
  CheckAttention(p);
  if (tiles_) {  // never in a build without Highway
#ifdef SMALLEM_HAVE_HWY
    cpu::TiledAttentionForward(p.qkv.f32(), p.out.f32(), p.lse.f32(),
                               !p.probs.empty() && TilesFitProbs(p.time) ? p.probs.f32() : nullptr,
                               p.batch, p.time, p.heads, p.head_dim, threads_);
    return;
#endif
  }
  const AttentionLayout l = LayoutOf(p.batch, p.time, p.heads, p.head_dim, gemm_);
  float* lse = p.lse.empty() ? nullptr : p.lse.f32();
  float* saved = p.probs.empty() ? nullptr : p.probs.f32();
  const float* qkv = p.qkv.f32();
  float* out = p.out.f32();
  const int64_t pairs = l.b * l.h;
#pragma omp parallel for num_threads(threads_) schedule(static) if (pairs > 1)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t b = pair / l.h, h = pair % l.h;
    const float* q = qkv + b * l.t * 3 * l.c + h * l.d;
    const float* k = q + l.c;
    const float* v = q + 2 * l.c;
    float* o = out + b * l.t * l.c + h * l.d;
    float* lse_bh = lse == nullptr ? nullptr : lse + pair * l.t;
    float* scratch = cpu::ThreadScratch((kBlock + l.d) * l.t);
    float* kt = scratch + kBlock * l.t;
    cpu::Transpose(k, l.t, l.d, 3 * l.c, kt, l.t);
    for (int64_t r0 = 0; r0 < l.t; r0 += kBlock) {
      const int64_t r1 = std::min(l.t, r0 + kBlock);
      float* scores = saved == nullptr ? scratch : saved + (pair * l.t + r0) * l.t;
      BlockScores(l, q, kt, r0, r1, scores);
      for (int64_t t = r0; t < r1; ++t) {
        float* s = scores + (t - r0) * l.t;
        const float row_max = cpu::Max(s, t + 1);
        const float sum = cpu::ExpShiftedSum(s, row_max, s, t + 1);
        const float inv_sum = 1.0f / sum;
#pragma omp simd
        for (int64_t j = 0; j <= t; ++j) s[j] *= inv_sum;
        // Future keys get probability 0 (the block's GEMM spans [0, r1)).
        std::fill(s + t + 1, s + r1, 0.0f);
        if (lse_bh != nullptr) lse_bh[t] = row_max + std::log(sum);
      }
      cpu::Gemm(l.gemm, false, false, r1 - r0, l.d, r1, 1.0f, scores, l.t, v, 3 * l.c, 0.0f,
                o + r0 * l.c, l.c);
    }
  }
}

void CpuBackend::AttentionBackward(const AttentionBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::AttentionBackward)) return;
  if (p.grad_qkv.empty()) return;
  CheckAttentionBackward(p);
  if (tiles_) {
#ifdef SMALLEM_HAVE_HWY
    const float* probs = !p.probs.empty() && TilesFitProbs(p.time) ? p.probs.f32() : nullptr;
    if (p.overwrite) {
      cpu::TiledAttentionBackward(p.qkv.f32(), p.lse.f32(), probs, p.grad_out.f32(),
                                  p.grad_qkv.f32(), p.batch, p.time, p.heads, p.head_dim,
                                  threads_);
      return;
    }
    // The kernels write: the gradient goes to scratch, then is added.
    const int64_t n = p.grad_qkv.numel();
    std::vector<float> grad(static_cast<size_t>(n));
    cpu::TiledAttentionBackward(p.qkv.f32(), p.lse.f32(), probs, p.grad_out.f32(), grad.data(),
                                p.batch, p.time, p.heads, p.head_dim, threads_);
    float* into = p.grad_qkv.f32();
    for (int64_t i = 0; i < n; ++i) into[i] += grad[static_cast<size_t>(i)];
    return;
#endif
  }
  const AttentionLayout l = LayoutOf(p.batch, p.time, p.heads, p.head_dim, gemm_);
  const float* qkv = p.qkv.f32();
  const float* out = p.out.f32();
  const float* lse = p.lse.f32();
  const float* saved = p.probs.empty() ? nullptr : p.probs.f32();
  const float* grad_out = p.grad_out.f32();
  float* grad_qkv = p.grad_qkv.f32();
  const int64_t pairs = l.b * l.h;
  const int64_t ld = 3 * l.c;
  // Each pair writes only its own head's slices of grad_qkv: no races.
#pragma omp parallel for num_threads(threads_) schedule(static) if (pairs > 1)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t b = pair / l.h, h = pair % l.h;
    const int64_t qkv_offset = b * l.t * ld + h * l.d;
    const int64_t out_offset = b * l.t * l.c + h * l.d;
    const float* q = qkv + qkv_offset;
    const float* k = q + l.c;
    const float* v = q + 2 * l.c;
    const float* o = out + out_offset;
    const float* d_o = grad_out + out_offset;
    float* dq = grad_qkv + qkv_offset;
    float* dk = dq + l.c;
    float* dv = dq + 2 * l.c;
    const float* lse_bh = lse + pair * l.t;
    const float* saved_bh = saved == nullptr ? nullptr : saved + pair * l.t * l.t;
    // P and dP (then dS) as (queries, kBlock) tiles; Kᵀ and Vᵀ (D, T).
    float* probs = cpu::ThreadScratch((2 * kBlock + 2 * l.d + 1) * l.t);
    float* d_scores = probs + kBlock * l.t;
    float* kt = d_scores + kBlock * l.t;
    float* vt = kt + l.d * l.t;
    float* delta = vt + l.d * l.t;
    if (saved_bh == nullptr) cpu::Transpose(k, l.t, l.d, ld, kt, l.t);  // only to recompute P
    cpu::Transpose(v, l.t, l.d, ld, vt, l.t);
    for (int64_t t = 0; t < l.t; ++t) {
      const float* o_row = o + t * l.c;
      const float* d_o_row = d_o + t * l.c;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < l.d; ++i) sum += d_o_row[i] * o_row[i];
      delta[t] = sum;
    }
    // Key block [c0, c1) is seen by the queries [c0, T): row i of the tiles
    // is query c0 + i, which sees the block's first min(keys, i + 1) keys.
    for (int64_t c0 = 0; c0 < l.t; c0 += kBlock) {
      const int64_t c1 = std::min(l.t, c0 + kBlock);
      const int64_t keys = c1 - c0, queries = l.t - c0;
      // P's tile: rows c0.. of the saved softmax at keys c0.., or recomputed.
      const float* tile = saved_bh == nullptr ? probs : saved_bh + c0 * l.t + c0;
      const int64_t ld_tile = saved_bh == nullptr ? kBlock : l.t;
      if (saved_bh == nullptr) {
        cpu::Gemm(l.gemm, false, false, queries, keys, l.d, l.scale, q + c0 * ld, ld, kt + c0, l.t,
                  0.0f, probs, kBlock);
      }
      cpu::Gemm(l.gemm, false, false, queries, keys, l.d, 1.0f, d_o + c0 * l.c, l.c, vt + c0, l.t,
                0.0f, d_scores, kBlock);
      for (int64_t i = 0; i < queries; ++i) {
        const float* prob = tile + i * ld_tile;
        float* ds = d_scores + i * kBlock;
        const int64_t seen = std::min(keys, i + 1);
        const float delta_i = delta[c0 + i];
        if (saved_bh == nullptr) {
          float* recomputed = probs + i * kBlock;
          cpu::ScaledExpShifted(recomputed, lse_bh[c0 + i], 1.0f, recomputed,
                                /*accumulate=*/false, seen);
          std::fill(recomputed + seen, recomputed + keys, 0.0f);
        }
        // The scale of S = scale·Q·Kᵀ folds in here once for dQ and dK.
#pragma omp simd
        for (int64_t j = 0; j < seen; ++j) ds[j] = prob[j] * (ds[j] - delta_i) * l.scale;
        std::fill(ds + seen, ds + keys, 0.0f);
      }
      const float beta_kv = p.overwrite ? 0.0f : 1.0f;
      const float beta_q = p.overwrite && c0 == 0 ? 0.0f : 1.0f;
      cpu::Gemm(l.gemm, true, false, keys, l.d, queries, 1.0f, tile, ld_tile, d_o + c0 * l.c, l.c,
                beta_kv, dv + c0 * ld, ld);
      cpu::Gemm(l.gemm, true, false, keys, l.d, queries, 1.0f, d_scores, kBlock, q + c0 * ld, ld,
                beta_kv, dk + c0 * ld, ld);
      cpu::Gemm(l.gemm, false, false, queries, l.d, keys, 1.0f, d_scores, kBlock, k + c0 * ld, ld,
                beta_q, dq + c0 * ld, ld);
    }
  }
}

}  // namespace smallem
