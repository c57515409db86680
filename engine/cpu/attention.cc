// Causal multi-head attention from packed qkv, one (batch, head) pair per
// task. Queries are taken in blocks of kBlock rows; a block only ever sees
// the keys at or before its last row, so the products are GEMMs on a
// kBlock × r1 tile (r1 the block's end): the blocks above the diagonal are
// never computed (at T = 128, 62.5 % of the full T × T products), and no
// T × T matrix is kept between calls. Softmax's exp and sums are
// vector_math.h's.
//
// Backward, per block of keys, in transposed tiles (key rows, query
// columns: every product untransposed), recomputing P = exp(S − lse) from
// the saved lse:
//   Pᵀ = exp(scale·K·Qᵀ − lse),  dPᵀ = V·dOᵀ,  dSᵀ = Pᵀ ∘ (dPᵀ − rowsum(dO ∘ O)),
//   dV += Pᵀ·dO,  dK += scale·dSᵀ·Q,  dQᵀ += scale·Kᵀ·dSᵀ.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
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
};

AttentionLayout LayoutOf(int64_t batch, int64_t time, int64_t heads, int64_t head_dim) {
  return {batch, time, heads, head_dim, heads * head_dim,
          1.0f / std::sqrt(static_cast<float>(head_dim))};
}

// dst (cols, rows) = srcᵀ for src (rows, cols) with leading dimension ld.
// Every product of attention runs untransposed on transposed copies (Kᵀ and
// Vᵀ once per pair, P and dS per block): OpenBLAS 0.3.21 sends products with
// a transposed operand at these sizes through its packing path, several
// times slower than its small-matrix kernels.
void Transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * ld + c];
  }
}

// scores[i, j] = scale·q[r0 + i]·k[j] for the block's rows and keys [0, r1),
// from kt = Kᵀ (head_dim, T).
void BlockScores(const AttentionLayout& l, const float* q, const float* kt,
                 int64_t r0, int64_t r1, float* scores) {
  cpu::Gemm(false, false, r1 - r0, r1, l.d, l.scale, q + r0 * 3 * l.c, 3 * l.c,
            kt, l.t, 0.0f, scores, l.t);
}

}  // namespace

void CpuBackend::AttentionForward(const AttentionParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::AttentionForward)) return;
  CheckAttention(p);
  const AttentionLayout l = LayoutOf(p.batch, p.time, p.heads, p.head_dim);
  float* lse = p.lse.empty() ? nullptr : p.lse.f32();
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
    float* scores = cpu::ThreadScratch((kBlock + l.d) * l.t);
    float* kt = scores + kBlock * l.t;
    Transpose(k, l.t, l.d, 3 * l.c, kt);
    for (int64_t r0 = 0; r0 < l.t; r0 += kBlock) {
      const int64_t r1 = std::min(l.t, r0 + kBlock);
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
      cpu::Gemm(false, false, r1 - r0, l.d, r1, 1.0f, scores, l.t, v, 3 * l.c,
                0.0f, o + r0 * l.c, l.c);
    }
  }
}

void CpuBackend::AttentionBackward(const AttentionBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::AttentionBackward)) return;
  if (p.grad_qkv.empty()) return;
  CheckAttentionBackward(p);
  const AttentionLayout l = LayoutOf(p.batch, p.time, p.heads, p.head_dim);
  const float* qkv = p.qkv.f32();
  const float* out = p.out.f32();
  const float* lse = p.lse.f32();
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
    float* probs_t = cpu::ThreadScratch((2 * kBlock + 4 * l.d + 1) * l.t);
    float* d_scores_t = probs_t + kBlock * l.t;  // dPᵀ, then dSᵀ
    float* qt = d_scores_t + kBlock * l.t;
    float* d_ot = qt + l.d * l.t;
    float* kt = d_ot + l.d * l.t;
    float* d_qt = kt + l.d * l.t;  // dQᵀ, summed over the key blocks
    float* delta = d_qt + l.d * l.t;
    Transpose(q, l.t, l.d, ld, qt);
    Transpose(d_o, l.t, l.d, l.c, d_ot);
    Transpose(k, l.t, l.d, ld, kt);
    std::fill(d_qt, d_qt + l.d * l.t, 0.0f);
    for (int64_t t = 0; t < l.t; ++t) {
      const float* o_row = o + t * l.c;
      const float* d_o_row = d_o + t * l.c;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < l.d; ++i) sum += d_o_row[i] * o_row[i];
      delta[t] = sum;
    }
    // Key block [c0, c1) is seen by the queries [c0, T); row j of the
    // transposed tiles holds key j against query c0 + column.
    for (int64_t c0 = 0; c0 < l.t; c0 += kBlock) {
      const int64_t c1 = std::min(l.t, c0 + kBlock);
      const int64_t keys = c1 - c0, queries = l.t - c0;
      cpu::Gemm(false, false, keys, queries, l.d, l.scale, k + c0 * ld, ld, qt + c0,
                l.t, 0.0f, probs_t, l.t);
      cpu::Gemm(false, false, keys, queries, l.d, 1.0f, v + c0 * ld, ld, d_ot + c0,
                l.t, 0.0f, d_scores_t, l.t);
      for (int64_t j = c0; j < c1; ++j) {
        float* prob = probs_t + (j - c0) * l.t;
        float* ds = d_scores_t + (j - c0) * l.t;
        const int64_t first = j - c0;  // query j, the first that sees key j
        std::fill(prob, prob + first, 0.0f);
        std::fill(ds, ds + first, 0.0f);
        cpu::ExpMinus(prob + first, lse_bh + j, prob + first, queries - first);
        const float* delta_c = delta + c0;
        // The scale of S = scale·Q·Kᵀ folds in here once for dQ and dK.
#pragma omp simd
        for (int64_t i = first; i < queries; ++i) {
          ds[i] = prob[i] * (ds[i] - delta_c[i]) * l.scale;
        }
      }
      cpu::Gemm(false, false, keys, l.d, queries, 1.0f, probs_t, l.t,
                d_o + c0 * l.c, l.c, 1.0f, dv + c0 * ld, ld);
      cpu::Gemm(false, false, keys, l.d, queries, 1.0f, d_scores_t, l.t,
                q + c0 * ld, ld, 1.0f, dk + c0 * ld, ld);
      cpu::Gemm(false, false, l.d, queries, keys, 1.0f, kt + c0, l.t, d_scores_t,
                l.t, 1.0f, d_qt + c0, l.t);
    }
    for (int64_t t = 0; t < l.t; ++t) {
      float* dq_row = dq + t * ld;
      for (int64_t i = 0; i < l.d; ++i) dq_row[i] += d_qt[i * l.t + t];
    }
  }
}

}  // namespace smallem
