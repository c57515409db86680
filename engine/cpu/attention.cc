// Causal multi-head attention from packed qkv, one (batch, head) pair per
// task. Queries are taken in blocks of kBlock rows; a block only ever sees
// the keys at or before its last row, so the products are GEMMs on a
// kBlock × r1 tile (r1 the block's end): the blocks above the diagonal are
// never computed (at T = 128, 62.5 % of the full T × T products), and no
// T × T matrix is kept between calls. Softmax's exp and sums are
// vector_math.h's.
//
// Backward, per block, recomputing P = exp(S − lse) from the saved lse:
//   dV += Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ∘ (dP − rowsum(dO ∘ O)),
//   dQ += scale·dS·K,  dK += scale·dSᵀ·Q.
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
    float* probs = cpu::ThreadScratch((3 * kBlock + 2 * l.d) * l.t);
    float* d_scores = probs + kBlock * l.t;
    float* transposed = d_scores + kBlock * l.t;
    float* kt = transposed + kBlock * l.t;
    float* vt = kt + l.d * l.t;
    Transpose(k, l.t, l.d, ld, kt);
    Transpose(v, l.t, l.d, ld, vt);
    for (int64_t r0 = 0; r0 < l.t; r0 += kBlock) {
      const int64_t r1 = std::min(l.t, r0 + kBlock);
      const int64_t rows = r1 - r0;
      BlockScores(l, q, kt, r0, r1, probs);
      for (int64_t t = r0; t < r1; ++t) {
        float* s = probs + (t - r0) * l.t;
        const float row_lse = lse_bh[t];
        cpu::ScaledExpShifted(s, row_lse, 1.0f, s, /*accumulate=*/false, t + 1);
        std::fill(s + t + 1, s + r1, 0.0f);
      }
      Transpose(probs, rows, r1, l.t, transposed);
      cpu::Gemm(false, false, r1, l.d, rows, 1.0f, transposed, rows,
                d_o + r0 * l.c, l.c, 1.0f, dv, ld);
      cpu::Gemm(false, false, rows, r1, l.d, 1.0f, d_o + r0 * l.c, l.c, vt, l.t,
                0.0f, d_scores, l.t);
      for (int64_t t = r0; t < r1; ++t) {
        const float* o_row = o + t * l.c;
        const float* d_o_row = d_o + t * l.c;
        float delta = 0;
#pragma omp simd reduction(+ : delta)
        for (int64_t i = 0; i < l.d; ++i) delta += d_o_row[i] * o_row[i];
        const float* prob = probs + (t - r0) * l.t;
        float* ds = d_scores + (t - r0) * l.t;
        // The scale of S = scale·Q·Kᵀ folds in here once for dQ and dK.
#pragma omp simd
        for (int64_t j = 0; j <= t; ++j) ds[j] = prob[j] * (ds[j] - delta) * l.scale;
        std::fill(ds + t + 1, ds + r1, 0.0f);
      }
      cpu::Gemm(false, false, rows, l.d, r1, 1.0f, d_scores, l.t, k, ld, 1.0f,
                dq + r0 * ld, ld);
      Transpose(d_scores, rows, r1, l.t, transposed);
      cpu::Gemm(false, false, r1, l.d, rows, 1.0f, transposed, rows,
                q + r0 * ld, ld, 1.0f, dk, ld);
    }
  }
}

}  // namespace smallem
