// Causal attention in register tiles, forward and backward, one (batch,
// head) pair per task, no BLAS: CpuBackend's attention where the build has
// Highway (engine/cpu/attention.cc dispatches; SMALLEM_ATTENTION=blas runs
// the BLAS path instead). docs/benchmarks.md § Attention in register tiles.
//
// Queries sit in vector lanes: for a block of L queries [r0, r0 + L) (L the
// lane count), the scores of key j are one vector s_j (lane i = query r0 + i),
// s_j = Σ_d Qᵀ[d][r0 .. r0 + L) · k_j[d], from Qᵀ (transposed once per pair)
// and k_j's entries broadcast from memory, several keys at a time so that
// one load of Qᵀ[d] feeds several independent FMA chains; two query blocks
// share each broadcast where both see the key. The softmax over keys is then
// elementwise across the key vectors (max, exp, sum: no horizontal
// reductions). A block only sees keys [0, r0 + L); the keys of the diagonal
// L × L tile beyond each lane's query are masked.
//
// The products whose result has head_dim columns (O = P·V, dQ = dS·K,
// dK = dSᵀ·Q, dV = Pᵀ·dO) run on row vectors instead: a register tile of
// rows × (up to 2 vectors of columns), one P (or dS) entry broadcast from the
// block's key-major buffer per row, V (K, Q, dO) rows loaded as vectors.
//
// Backward, in two phases per chunk of query blocks (all of them at T = 128):
// phase 1 recomputes P = exp(scale·s − lse) with dP = dO·Vᵀ in the same
// query-lane form (dOᵀ transposed once per pair) — or reads the forward's
// kept P and computes dP alone — then dS = P ∘ (dP − δ)·scale with
// δ = Σ_j P ∘ dP (= rowsum(dO ∘ O), so out is never read), then the block's
// dQ rows. Phase 2 runs over groups of keys: dK and dV accumulate in
// registers over every query of the chunk that sees the key and are stored
// once (added to by later chunks). grad_qkv is never read before written.
//
// exp is engine/cpu/highway_exp.h's FastExp, the other CPU ops' exp.
//
// head_dim a multiple of L reads and writes qkv/out/grads in place; any
// other head_dim goes through zero-padded (T, roundup(D, L)) copies.
#ifdef SMALLEM_HAVE_HWY

#include "engine/cpu/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

// Static dispatch only, as engine/cpu/vector_math_highway.cc.
#define HWY_COMPILE_ONLY_STATIC 1
#include "engine/cpu/highway_exp.h"
#include "engine/cpu/thread_scratch.h"
#include "engine/cpu/transpose.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

namespace smallem::cpu {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using hwy_exp::FastExp;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr bool kManyRegs = true;  // AVX-512's 32 vector registers
#else
constexpr bool kManyRegs = false;
#endif
// Keys per step of the forward's score kernel (that many accumulators; the
// two-block form twice as many).
constexpr int kScoreKeys = kManyRegs ? 8 : 4;
// Keys per step of the backward's dot products (scores, dP): one query
// block and two.
constexpr int kDotKeys = kManyRegs ? 16 : 8;
constexpr int kDotKeys2 = kManyRegs ? 8 : 4;
// Rows per step of O = P·V and dQ = dS·K (rows × 2 vector accumulators).
constexpr int kRows = kManyRegs ? 8 : 4;
// Keys per step of dK/dV (2 products × keys × 2 vector accumulators).
constexpr int kKeyRows = kManyRegs ? 4 : 2;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---- Packing ---------------------------------------------------------------

// The copies of a head width that is not a multiple of the lanes (the
// kernels then work on rows padded to Dp).
// dst (rows, ldd) = src's (rows, cols) of row stride ld, zero-padded.
void PackRows(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ldd, src + r * ld, cols * sizeof(float));
    std::fill(dst + r * ldd + cols, dst + (r + 1) * ldd, 0.0f);
  }
}

// dst's (rows, cols) of row stride ld = src's (row stride lds).
void UnpackRows(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ld, src + r * lds, cols * sizeof(float));
}

// ---- Kernels -----------------------------------------------------------------

// acc[k][lane] = Σ_{d < D} xt[d·ldt + lane] · rows[k·ld + d], k < NK: one
// query block (queries in lanes, from Qᵀ or dOᵀ) against NK rows of K or V,
// their entries broadcast; one load of xt[d] feeds NK independent chains.
template <int NK>
HWY_INLINE void LaneDots(const float* HWY_RESTRICT xt, int64_t ldt,
                         const float* HWY_RESTRICT rows, int64_t ld, int64_t D, VF (&acc)[NK]) {
  const DF df;
#pragma GCC unroll 16
  for (int k = 0; k < NK; ++k) acc[k] = hn::Zero(df);
#pragma GCC unroll 4
  for (int64_t d = 0; d < D; ++d) {
    const VF x = hn::LoadU(df, xt + d * ldt);
#pragma GCC unroll 16
    for (int k = 0; k < NK; ++k) acc[k] = hn::MulAdd(x, hn::Set(df, rows[k * ld + d]), acc[k]);
  }
}

// LaneDots for two query blocks at once, xt's lanes [0, L) into a and
// [L, 2L) into b: each broadcast entry feeds both.
template <int NK>
HWY_INLINE void LaneDots2(const float* HWY_RESTRICT xt, int64_t ldt,
                          const float* HWY_RESTRICT rows, int64_t ld, int64_t D, VF (&a)[NK],
                          VF (&b)[NK]) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
#pragma GCC unroll 16
  for (int k = 0; k < NK; ++k) a[k] = b[k] = hn::Zero(df);
#pragma GCC unroll 4
  for (int64_t d = 0; d < D; ++d) {
    const VF xa = hn::LoadU(df, xt + d * ldt);
    const VF xb = hn::LoadU(df, xt + d * ldt + L);
#pragma GCC unroll 16
    for (int k = 0; k < NK; ++k) {
      const VF r = hn::Set(df, rows[k * ld + d]);
      a[k] = hn::MulAdd(xa, r, a[k]);
      b[k] = hn::MulAdd(xb, r, b[k]);
    }
  }
}

// out[k·L + lane] = acc[k][lane], k < NK.
template <int NK>
HWY_INLINE void StoreLanes(const VF (&acc)[NK], float* HWY_RESTRICT out) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
#pragma GCC unroll 16
  for (int k = 0; k < NK; ++k) hn::StoreU(acc[k], df, out + k * L);
}

// The scores of keys j0 + k (k < NK) for the queries r0 + lane, stored as
// StoreLanes does, −∞ where the key comes after the lane's query; m, the
// block's running maximum, raised to them.
template <int NK>
HWY_INLINE void StoreScores(const VF (&acc)[NK], int64_t j0, int64_t r0, float* HWY_RESTRICT st,
                            VF& m) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const VF query = hn::Iota(df, static_cast<float>(r0));
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
#pragma GCC unroll 16
  for (int k = 0; k < NK; ++k) {
    VF a = acc[k];
    if (j0 + k > r0)
      a = hn::IfThenElse(hn::Lt(query, hn::Set(df, static_cast<float>(j0 + k))), neg_inf, a);
    m = hn::Max(m, a);
    hn::StoreU(a, df, st + k * L);
  }
}

// Scores of keys j0 + k (k < NK) for the block of queries r0 + lane, from
// Qᵀ (qt) and K's rows: st[k·L + lane] = q·k, masked as StoreScores.
template <int NK>
HWY_INLINE void Scores(const float* qt, int64_t ldq, const float* key, int64_t ldk, int64_t D,
                       float* st, int64_t j0, int64_t r0, VF& m) {
  VF acc[NK];
  LaneDots<NK>(qt, ldq, key, ldk, D, acc);
  StoreScores(acc, j0, r0, st, m);
}

// Scores for two query blocks at once, [r0, r0 + L) into sa and
// [r0 + L, r0 + 2L) into sb; ma, mb their running maxima.
template <int NK>
HWY_INLINE void Scores2(const float* qt, int64_t ldq, const float* key, int64_t ldk, int64_t D,
                        float* sa, float* sb, int64_t j0, int64_t r0, VF& ma, VF& mb) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  VF acc_a[NK], acc_b[NK];
  LaneDots2<NK>(qt, ldq, key, ldk, D, acc_a, acc_b);
  StoreScores(acc_a, j0, r0, sa, ma);
  StoreScores(acc_b, j0, r0 + L, sb, mb);
}

// Rows i < R of out (row stride ldo), DV vectors of columns:
// out[i] = row_scale[i] · Σ_{j < nj} w[j·L + i] · x[j·ldx]  (row_scale null: 1).
template <int R, int DV>
HWY_INLINE void RowsTile(const float* HWY_RESTRICT w, int64_t nj, const float* HWY_RESTRICT x,
                         int64_t ldx, const float* HWY_RESTRICT row_scale, float* HWY_RESTRICT out,
                         int64_t ldo) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  VF acc[R][DV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < DV; ++v) acc[r][v] = hn::Zero(df);
  }
  for (int64_t j = 0; j < nj; ++j) {
    VF xv[DV];
#pragma GCC unroll 4
    for (int v = 0; v < DV; ++v) xv[v] = hn::LoadU(df, x + j * ldx + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const VF wv = hn::Set(df, w[j * L + r]);
#pragma GCC unroll 4
      for (int v = 0; v < DV; ++v) acc[r][v] = hn::MulAdd(wv, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const VF s = row_scale == nullptr ? hn::Set(df, 1.0f) : hn::Set(df, row_scale[r]);
#pragma GCC unroll 4
    for (int v = 0; v < DV; ++v) hn::StoreU(hn::Mul(acc[r][v], s), df, out + r * ldo + v * L);
  }
}

template <int R>
HWY_INLINE void RowsAllColumns(const float* w, int64_t nj, const float* x, int64_t ldx,
                               const float* row_scale, float* out, int64_t ldo, int64_t Dp) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  int64_t c = 0;
  for (; c + 2 * L <= Dp; c += 2 * L) RowsTile<R, 2>(w, nj, x + c, ldx, row_scale, out + c, ldo);
  if (c < Dp) RowsTile<R, 1>(w, nj, x + c, ldx, row_scale, out + c, ldo);
}

// The block's nr rows (queries r0 + i): out[i] = row_scale[i] · Σ_j w[j][i] x[j],
// over keys j ≤ r0 + i (w is zero beyond), j < nk. w is key-major (L per key).
void BlockRows(const float* w, int64_t r0, int64_t nr, int64_t nk, const float* x, int64_t ldx,
               const float* row_scale, float* out, int64_t ldo, int64_t Dp) {
  int64_t i0 = 0;
  auto nj = [&](int64_t rows) { return std::min(nk, r0 + i0 + rows); };
  auto scale = [&](int64_t i) { return row_scale == nullptr ? nullptr : row_scale + i; };
  for (; i0 + kRows <= nr; i0 += kRows) {
    RowsAllColumns<kRows>(w + i0, nj(kRows), x, ldx, scale(i0), out + i0 * ldo, ldo, Dp);
  }
  for (; i0 < nr; ++i0)
    RowsAllColumns<1>(w + i0, nj(1), x, ldx, scale(i0), out + i0 * ldo, ldo, Dp);
}

// The backward's P and dS of a chunk of query blocks, key-major per block:
// block b's entry (key j, lane i) at off[b] + j·L + i.
struct BlockBuffers {
  const float* p;
  const float* ds;
  const int64_t* off_p;   // block b's P at p + off_p[b]
  const int64_t* off_ds;  // and its dS at ds + off_ds[b]
};

// dK, dV rows of the keys j0 + r, r < R (rows of dk, dv, stride ldkv), DV
// vectors of columns, over the queries of blocks [b_first, b_end) that see
// them (query r0 + i, i < that block's rows, i ≥ j0 − r0):
//   dk[r] (+)= Σ_i dS[j0 + r][i] · q[i],   dv[r] (+)= Σ_i P[j0 + r][i] · g[i]
// q, g the packed Q and dO rows (stride ldp); stored, or added with `add`.
// Every key of the group must lie in block b_first's keys (R divides L).
template <int R, int DV>
HWY_INLINE void KeyRowsTile(const BlockBuffers& bufs, int64_t b_first, int64_t b_end, int64_t j0,
                            int64_t T, const float* HWY_RESTRICT q, int64_t ldq,
                            const float* HWY_RESTRICT g, int64_t ldg, float* HWY_RESTRICT dk,
                            float* HWY_RESTRICT dv, int64_t ldkv, bool add) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  VF ak[R][DV], av[R][DV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < DV; ++v) ak[r][v] = av[r][v] = hn::Zero(df);
  }
  for (int64_t b = b_first; b < b_end; ++b) {
    const int64_t r0 = b * L, nr = std::min(L, T - r0);
    const float* HWY_RESTRICT ds = bufs.ds + bufs.off_ds[b] + j0 * L;
    const float* HWY_RESTRICT p = bufs.p + bufs.off_p[b] + j0 * L;
    const float* HWY_RESTRICT qb = q + r0 * ldq;
    const float* HWY_RESTRICT gb = g + r0 * ldg;
    for (int64_t i = std::max<int64_t>(0, j0 - r0); i < nr; ++i) {
      VF qv[DV], gv[DV];
#pragma GCC unroll 4
      for (int v = 0; v < DV; ++v) {
        qv[v] = hn::LoadU(df, qb + i * ldq + v * L);
        gv[v] = hn::LoadU(df, gb + i * ldg + v * L);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const VF dsv = hn::Set(df, ds[r * L + i]);
        const VF pv = hn::Set(df, p[r * L + i]);
#pragma GCC unroll 4
        for (int v = 0; v < DV; ++v) {
          ak[r][v] = hn::MulAdd(dsv, qv[v], ak[r][v]);
          av[r][v] = hn::MulAdd(pv, gv[v], av[r][v]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* k_row = dk + r * ldkv;
    float* v_row = dv + r * ldkv;
#pragma GCC unroll 4
    for (int v = 0; v < DV; ++v) {
      if (add) {
        ak[r][v] = hn::Add(hn::LoadU(df, k_row + v * L), ak[r][v]);
        av[r][v] = hn::Add(hn::LoadU(df, v_row + v * L), av[r][v]);
      }
      hn::StoreU(ak[r][v], df, k_row + v * L);
      hn::StoreU(av[r][v], df, v_row + v * L);
    }
  }
}

template <int R>
HWY_INLINE void KeyRowsAllColumns(const BlockBuffers& bufs, int64_t b_first, int64_t b_end,
                                  int64_t j0, int64_t T, const float* q, int64_t ldq,
                                  const float* g, int64_t ldg, int64_t Dp, float* dk, float* dv,
                                  int64_t ldkv, bool add) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  int64_t c = 0;
  for (; c + 2 * L <= Dp; c += 2 * L) {
    KeyRowsTile<R, 2>(bufs, b_first, b_end, j0, T, q + c, ldq, g + c, ldg, dk + c, dv + c, ldkv,
                      add);
  }
  if (c < Dp) {
    KeyRowsTile<R, 1>(bufs, b_first, b_end, j0, T, q + c, ldq, g + c, ldg, dk + c, dv + c, ldkv,
                      add);
  }
}

// The backward's scores and dP of keys j0 + k (k < NK) for one query block:
// s_out from Qᵀ and K's rows, dp_out from dOᵀ and V's, as StoreLanes lays
// them out (the scores unmasked: BlockGradients masks P).
template <int NK>
HWY_INLINE void ScoresAndGrads(const float* qt, const float* gt, int64_t ldt, const float* key,
                               const float* val, int64_t ld, int64_t D, float* s_out,
                               float* dp_out) {
  VF acc[NK];
  LaneDots<NK>(qt, ldt, key, ld, D, acc);
  StoreLanes(acc, s_out);
  LaneDots<NK>(gt, ldt, val, ld, D, acc);
  StoreLanes(acc, dp_out);
}

// ScoresAndGrads for two query blocks at once: block a's into sa/pa,
// block b's into sb/pb.
template <int NK>
HWY_INLINE void ScoresAndGrads2(const float* qt, const float* gt, int64_t ldt, const float* key,
                                const float* val, int64_t ld, int64_t D, float* sa, float* pa,
                                float* sb, float* pb) {
  VF acc_a[NK], acc_b[NK];
  LaneDots2<NK>(qt, ldt, key, ld, D, acc_a, acc_b);
  StoreLanes(acc_a, sa);
  StoreLanes(acc_b, sb);
  LaneDots2<NK>(gt, ldt, val, ld, D, acc_a, acc_b);
  StoreLanes(acc_a, pa);
  StoreLanes(acc_b, pb);
}

// dP of one query block where P is kept (no scores to recompute): from dOᵀ
// (xt) and V's rows, into out as StoreLanes lays it out.
template <int NK>
HWY_INLINE void Dots(const float* xt, int64_t ldt, const float* rows, int64_t ld, int64_t D,
                     float* out) {
  VF acc[NK];
  LaneDots<NK>(xt, ldt, rows, ld, D, acc);
  StoreLanes(acc, out);
}

// Dots for two query blocks at once (xt's lanes [0, 2L)): into oa and ob.
template <int NK>
HWY_INLINE void Dots2(const float* xt, int64_t ldt, const float* rows, int64_t ld, int64_t D,
                      float* oa, float* ob) {
  VF acc_a[NK], acc_b[NK];
  LaneDots2<NK>(xt, ldt, rows, ld, D, acc_a, acc_b);
  StoreLanes(acc_a, oa);
  StoreLanes(acc_b, ob);
}

// ---- Per pair ------------------------------------------------------------------

struct Shape {
  int64_t T, D, C, L, Tp, Dp;
  float scale;
  bool direct;  // D a multiple of L: operate in place
};

Shape ShapeOf(int64_t T, int64_t H, int64_t D) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  bool direct = D % L == 0;
  return {T,     D, H * D, L, RoundUp(T, L), RoundUp(D, L), 1.0f / std::sqrt(static_cast<float>(D)),
          direct};
}

// K's and V's rows for the kernels: read in place where the head width is a
// multiple of the lanes (packing them contiguous, to dodge L1 set conflicts,
// measured slower: the copy costs more), otherwise packed into kp and vp.
// Returns their row stride.
int64_t KeyValueRows(const Shape& s, const float** k, const float** v, int64_t ld, float* kp,
                     float* vp) {
  if (s.direct) return ld;
  PackRows(*k, s.T, s.D, ld, kp, s.Dp);
  PackRows(*v, s.T, s.D, ld, vp, s.Dp);
  *k = kp;
  *v = vp;
  return s.Dp;
}

// Softmax of a block's scores st (keys [0, nk), max m) in place, its lse,
// and its O rows.
// With `normalize`, P itself is left in st (for the backward to keep).
void SoftmaxRows(const Shape& s, int64_t r0, float* st, VF m, const float* vp, int64_t ldv,
                 float* o, int64_t ldo, float* lse, float* inv, float* o_block, bool normalize) {
  const DF df;
  const int64_t L = s.L, T = s.T, D = s.D, Dp = s.Dp;
  const int64_t nk = std::min(T, r0 + L), nr = nk - r0;
  const VF scale = hn::Set(df, s.scale);
  const VF shift = hn::Mul(m, scale);
  VF sum0 = hn::Zero(df), sum1 = hn::Zero(df);
  int64_t j = 0;
  for (; j + 2 <= nk; j += 2) {
    const VF e0 = FastExp(df, hn::MulSub(hn::LoadU(df, st + j * L), scale, shift));
    const VF e1 = FastExp(df, hn::MulSub(hn::LoadU(df, st + (j + 1) * L), scale, shift));
    hn::StoreU(e0, df, st + j * L);
    hn::StoreU(e1, df, st + (j + 1) * L);
    sum0 = hn::Add(sum0, e0);
    sum1 = hn::Add(sum1, e1);
  }
  if (j < nk) {
    const VF e0 = FastExp(df, hn::MulSub(hn::LoadU(df, st + j * L), scale, shift));
    hn::StoreU(e0, df, st + j * L);
    sum0 = hn::Add(sum0, e0);
  }
  const VF sum = hn::Add(sum0, sum1);
  const VF inv_sum = hn::Div(hn::Set(df, 1.0f), sum);
  hn::StoreU(inv_sum, df, inv);
  float lse_block[hn::MaxLanes(DF())];
  hn::StoreU(hn::Add(shift, hn::Log(df, sum)), df, lse_block);
  std::memcpy(lse + r0, lse_block, nr * sizeof(float));
  // O from the unnormalized exps, each row scaled once: the same bits
  // whether P is kept or not.
  if (s.direct) {
    BlockRows(st, r0, nr, nk, vp, ldv, inv, o + r0 * ldo, ldo, Dp);
  } else {
    BlockRows(st, r0, nr, nk, vp, ldv, inv, o_block, Dp, Dp);
    UnpackRows(o_block, nr, D, Dp, o + r0 * ldo, ldo);
  }
  if (normalize) {
    for (j = 0; j < nk; ++j)
      hn::StoreU(hn::Mul(hn::LoadU(df, st + j * L), inv_sum), df, st + j * L);
  }
}

// Floats of a pair's kept P: block b's (keys min(T, bL + L), L lanes) at
// PairProbsOffset(b).
int64_t PairProbsOffset(int64_t L, int64_t b) { return L * L * b * (b + 1) / 2; }
int64_t PairProbsFloats(int64_t L, int64_t T) {
  const int64_t nb = RoundUp(T, L) / L;
  return PairProbsOffset(L, nb - 1) + L * T;
}

// One pair's forward. Query blocks go two at a time through the score
// kernel (one broadcast of a key entry feeds both), then one at a time
// through softmax and P·V.
void ForwardPair(const Shape& s, const float* q, const float* k, const float* v, int64_t ld,
                 float* o, int64_t ldo, float* lse, float* probs) {
  const DF df;
  const int64_t L = s.L, T = s.T, D = s.D, Tp = s.Tp, Dp = s.Dp;
  // Scratch: Qᵀ (D, Tp + L: a zero block past the end); two blocks' scores
  // then P (Tp, L each); 1/sum (L); K and V packed (T, Dp); for a ragged
  // head_dim a block's O rows (L, Dp).
  const int64_t ldt = Tp + L;
  float* qt = ThreadScratch(D * ldt + 2 * Tp * L + L + 2 * T * Dp + L * Dp);
  float* sa = qt + D * ldt;
  float* sb = sa + Tp * L;
  float* inv = sb + Tp * L;
  float* kp = inv + L;
  float* vp = kp + T * Dp;
  float* o_block = vp + T * Dp;
  Transpose(q, T, D, ld, qt, ldt);
  const int64_t ldkv = KeyValueRows(s, &k, &v, ld, kp, vp);

  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (int64_t r0 = 0; r0 < T; r0 += 2 * L) {
    const bool two = r0 + L < T;
    const int64_t nka = std::min(T, r0 + L), nkb = std::min(T, r0 + 2 * L);
    VF ma = neg_inf, mb = neg_inf;
    int64_t j = 0;
    if (probs != nullptr) {  // the blocks' P go straight to the kept buffer
      sa = probs + PairProbsOffset(L, r0 / L);
      sb = probs + PairProbsOffset(L, r0 / L + 1);
    }
    if (two) {
      for (; j + kScoreKeys <= nka; j += kScoreKeys) {
        Scores2<kScoreKeys>(qt + r0, ldt, k + j * ldkv, ldkv, D, sa + j * L, sb + j * L, j, r0,
                             ma, mb);
      }
      for (; j < nka; ++j) {
        Scores2<1>(qt + r0, ldt, k + j * ldkv, ldkv, D, sa + j * L, sb + j * L, j, r0, ma, mb);
      }
      for (; j + kScoreKeys <= nkb; j += kScoreKeys) {
        Scores<kScoreKeys>(qt + r0 + L, ldt, k + j * ldkv, ldkv, D, sb + j * L, j, r0 + L, mb);
      }
      for (; j < nkb; ++j)
        Scores<1>(qt + r0 + L, ldt, k + j * ldkv, ldkv, D, sb + j * L, j, r0 + L, mb);
    } else {
      for (; j + kScoreKeys <= nka; j += kScoreKeys) {
        Scores<kScoreKeys>(qt + r0, ldt, k + j * ldkv, ldkv, D, sa + j * L, j, r0, ma);
      }
      for (; j < nka; ++j) Scores<1>(qt + r0, ldt, k + j * ldkv, ldkv, D, sa + j * L, j, r0, ma);
    }
    SoftmaxRows(s, r0, sa, ma, v, ldkv, o, ldo, lse, inv, o_block, probs != nullptr);
    if (two) SoftmaxRows(s, r0 + L, sb, mb, v, ldkv, o, ldo, lse, inv, o_block, probs != nullptr);
  }
}

// P and dS of a chunk of query blocks live in scratch together (for dK/dV's
// long sweeps over queries): at most this many floats each (64 KiB; every
// block of T ≤ 128 at 16 lanes; longer contexts run in chunks).
constexpr int64_t kChunkFloats = 16384;

// P = exp(scale·s − lse) (0 after each lane's query) over the block's
// scores in pb, then dS = P ∘ (dP − δ)·scale over its dP in dsb, with
// δ = Σ_j P ∘ dP (= rowsum(dO ∘ O), without reading O).
void BlockGradients(const Shape& s, int64_t r0, int64_t nk, const float* lsep, float* pb,
                    float* dsb, bool recompute) {
  const DF df;
  const int64_t L = s.L;
  const VF scale = hn::Set(df, s.scale);
  const VF lse_v = hn::LoadU(df, lsep + r0);
  const VF query = hn::Iota(df, static_cast<float>(r0));
  VF delta0 = hn::Zero(df), delta1 = hn::Zero(df);
  int64_t j = 0;
  if (!recompute) {  // pb holds the kept P
    for (; j + 2 <= nk; j += 2) {
      delta0 = hn::MulAdd(hn::LoadU(df, pb + j * L), hn::LoadU(df, dsb + j * L), delta0);
      delta1 =
          hn::MulAdd(hn::LoadU(df, pb + (j + 1) * L), hn::LoadU(df, dsb + (j + 1) * L), delta1);
    }
    j = nk;
    if (nk % 2 != 0)
      delta0 =
          hn::MulAdd(hn::LoadU(df, pb + (nk - 1) * L), hn::LoadU(df, dsb + (nk - 1) * L), delta0);
  }
  for (; j + 2 <= nk; j += 2) {
    VF p0 = FastExp(df, hn::MulSub(hn::LoadU(df, pb + j * L), scale, lse_v));
    VF p1 = FastExp(df, hn::MulSub(hn::LoadU(df, pb + (j + 1) * L), scale, lse_v));
    if (j + 1 > r0) {
      p0 = hn::IfThenZeroElse(hn::Lt(query, hn::Set(df, static_cast<float>(j))), p0);
      p1 = hn::IfThenZeroElse(hn::Lt(query, hn::Set(df, static_cast<float>(j + 1))), p1);
    }
    hn::StoreU(p0, df, pb + j * L);
    hn::StoreU(p1, df, pb + (j + 1) * L);
    delta0 = hn::MulAdd(p0, hn::LoadU(df, dsb + j * L), delta0);
    delta1 = hn::MulAdd(p1, hn::LoadU(df, dsb + (j + 1) * L), delta1);
  }
  if (j < nk) {
    VF p0 = FastExp(df, hn::MulSub(hn::LoadU(df, pb + j * L), scale, lse_v));
    if (j > r0) p0 = hn::IfThenZeroElse(hn::Lt(query, hn::Set(df, static_cast<float>(j))), p0);
    hn::StoreU(p0, df, pb + j * L);
    delta0 = hn::MulAdd(p0, hn::LoadU(df, dsb + j * L), delta0);
  }
  const VF delta = hn::Add(delta0, delta1);
  for (j = 0; j < nk; ++j) {
    const VF dp = hn::LoadU(df, dsb + j * L);
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, pb + j * L), scale), hn::Sub(dp, delta)), df,
               dsb + j * L);
  }
}

// Phase 1, per pair of query blocks (one broadcast of a K or V entry feeds
// both): scores and dP, then P and dS, then the blocks' dQ rows, into the
// chunk's buffers. Phase 2, per group of keys: dK and dV over all of the
// chunk's queries that see them, in registers, stored (or added) once.
void BackwardPair(const Shape& s, const float* q, const float* k, const float* v, int64_t ld,
                  const float* g, int64_t ldo, const float* lse, const float* probs, float* dq,
                  float* dk, float* dv) {
  const bool kept = probs != nullptr;
  const int64_t L = s.L, T = s.T, D = s.D, Tp = s.Tp, Dp = s.Dp, nb = Tp / L;
  auto keys_of = [&](int64_t b) { return std::min(T, b * L + L); };
  // A chunk holds at least one pair of blocks, whatever its size.
  const int64_t chunk_floats = std::max(kChunkFloats, 2 * L * T);
  // Scratch: Qᵀ and dOᵀ (D, Tp); lse (+∞ padded, Tp); Q, K, V, dO packed
  // (T, Dp) where used; the chunk's P and dS; the blocks' offsets in them;
  // for a ragged head_dim dQ, dK, dV as (T, Dp).
  const int64_t out_floats = s.direct ? 0 : 3 * T * Dp;
  // The offsets go last, 8-byte aligned.
  const int64_t float_count =
      RoundUp(2 * D * Tp + Tp + 4 * T * Dp + 2 * chunk_floats + out_floats, 2);
  float* qt = ThreadScratch(float_count + 2 * (2 * nb + 2));
  float* gt = qt + D * Tp;
  float* lsep = gt + D * Tp;
  float* qp = lsep + Tp;
  float* kp = qp + T * Dp;
  float* vp = kp + T * Dp;
  float* gp = vp + T * Dp;
  float* p_all = gp + T * Dp;
  float* ds_all = p_all + chunk_floats;
  float* out_bufs = ds_all + chunk_floats;
  int64_t* off = reinterpret_cast<int64_t*>(qt + float_count);
  int64_t* off_p = off + nb + 1;  // where P is read: the kept buffer or the chunk's
  if (kept) {
    for (int64_t b = 0; b < nb; ++b) off_p[b] = PairProbsOffset(L, b);
    p_all = const_cast<float*>(probs);  // only read
  } else {
    std::memcpy(lsep, lse, T * sizeof(float));
    std::fill(lsep + T, lsep + Tp, std::numeric_limits<float>::infinity());
    Transpose(q, T, D, ld, qt, Tp);
  }
  Transpose(g, T, D, ldo, gt, Tp);
  // Rows read in place where D allows (as in the forward).
  const int64_t ldkv = KeyValueRows(s, &k, &v, ld, kp, vp);
  int64_t ldq = ld, ldg = ldo;
  if (!s.direct) {
    PackRows(q, T, D, ld, qp, Dp);
    PackRows(g, T, D, ldo, gp, Dp);
    q = qp;
    g = gp;
    ldq = ldg = Dp;
  }
  float *dqb = dq, *dkb = dk, *dvb = dv;
  int64_t ldgrad = ld;
  if (!s.direct) {
    dqb = out_bufs;
    dkb = dqb + T * Dp;
    dvb = dkb + T * Dp;
    ldgrad = Dp;
  }

  for (int64_t b_start = 0, b_end = 0; b_start < nb; b_start = b_end) {
    // The chunk: pairs of blocks [b_start, b_end) whose P fits chunk_floats.
    int64_t used = 0;
    for (b_end = b_start; b_end < nb;) {
      const int64_t unit = std::min<int64_t>(2, nb - b_end);
      int64_t need = L * keys_of(b_end);
      if (unit == 2) need += L * keys_of(b_end + 1);
      if (used + need > chunk_floats) break;
      off[b_end] = used;
      if (unit == 2) off[b_end + 1] = used + L * keys_of(b_end);
      if (!kept) {
        off_p[b_end] = off[b_end];
        if (unit == 2) off_p[b_end + 1] = off[b_end + 1];
      }
      used += need;
      b_end += unit;
    }
    for (int64_t b = b_start; b < b_end; b += 2) {
      const int64_t r0 = b * L, nka = keys_of(b);
      const bool two = b + 1 < b_end;
      const int64_t nkb = two ? keys_of(b + 1) : nka;
      float *pa = p_all + off_p[b], *dsa = ds_all + off[b];
      float *pb = two ? p_all + off_p[b + 1] : nullptr, *dsb = two ? ds_all + off[b + 1] : nullptr;
      int64_t j = 0;
      if (kept) {  // dP only
        if (two) {
          for (; j + kDotKeys2 <= nka; j += kDotKeys2) {
            Dots2<kDotKeys2>(gt + r0, Tp, v + j * ldkv, ldkv, D, dsa + j * L, dsb + j * L);
          }
          for (; j < nka; ++j)
            Dots2<1>(gt + r0, Tp, v + j * ldkv, ldkv, D, dsa + j * L, dsb + j * L);
        }
        const int64_t rl = two ? r0 + L : r0, nkl = two ? nkb : nka;
        float* dsl = two ? dsb : dsa;
        for (; j + kDotKeys <= nkl; j += kDotKeys) {
          Dots<kDotKeys>(gt + rl, Tp, v + j * ldkv, ldkv, D, dsl + j * L);
        }
        for (; j < nkl; ++j) Dots<1>(gt + rl, Tp, v + j * ldkv, ldkv, D, dsl + j * L);
      } else if (two) {
        for (; j + kDotKeys <= nka; j += kDotKeys) {
          ScoresAndGrads2<kDotKeys>(qt + r0, gt + r0, Tp, k + j * ldkv, v + j * ldkv, ldkv,
                                           D, pa + j * L, dsa + j * L, pb + j * L, dsb + j * L);
        }
        for (; j < nka; ++j) {
          ScoresAndGrads2<1>(qt + r0, gt + r0, Tp, k + j * ldkv, v + j * ldkv, ldkv, D, pa + j * L,
                             dsa + j * L, pb + j * L, dsb + j * L);
        }
        for (; j + kDotKeys <= nkb; j += kDotKeys) {
          ScoresAndGrads<kDotKeys>(qt + r0 + L, gt + r0 + L, Tp, k + j * ldkv, v + j * ldkv,
                                         ldkv, D, pb + j * L, dsb + j * L);
        }
        for (; j < nkb; ++j) {
          ScoresAndGrads<1>(qt + r0 + L, gt + r0 + L, Tp, k + j * ldkv, v + j * ldkv, ldkv, D,
                            pb + j * L, dsb + j * L);
        }
      } else {
        for (; j + kDotKeys <= nka; j += kDotKeys) {
          ScoresAndGrads<kDotKeys>(qt + r0, gt + r0, Tp, k + j * ldkv, v + j * ldkv, ldkv, D,
                                         pa + j * L, dsa + j * L);
        }
        for (; j < nka; ++j) {
          ScoresAndGrads<1>(qt + r0, gt + r0, Tp, k + j * ldkv, v + j * ldkv, ldkv, D, pa + j * L,
                            dsa + j * L);
        }
      }
      for (int blk = 0; blk < (two ? 2 : 1); ++blk) {
        const int64_t rb = r0 + blk * L, nk = blk ? nkb : nka;
        float* p_blk = blk ? pb : pa;
        float* ds_blk = blk ? dsb : dsa;
        BlockGradients(s, rb, nk, lsep, p_blk, ds_blk, !kept);
        // dQ rows of the block: Σ_j dS[j][i]·K[j].
        BlockRows(ds_blk, rb, nk - rb, nk, k, ldkv, nullptr, dqb + rb * ldgrad, ldgrad, Dp);
      }
    }
    // dK, dV of the keys the chunk's queries see, over all those queries;
    // a key's rows are stored by the chunk holding its own block, added to
    // by later chunks.
    const BlockBuffers bufs{p_all, ds_all, off_p, off};
    const int64_t keys = keys_of(b_end - 1);
    int64_t j0 = 0;
    auto group = [&](auto rows_tag, int64_t j0) {
      constexpr int R = decltype(rows_tag)::value;
      const int64_t own = j0 / L;
      KeyRowsAllColumns<R>(bufs, std::max(b_start, own), b_end, j0, T, q, ldq, g, ldg, Dp,
                           dkb + j0 * ldgrad, dvb + j0 * ldgrad, ldgrad, own < b_start);
    };
    // A group must lie in one block: kKeyRows divides L, except L = 1.
    if (L % kKeyRows == 0) {
      for (; j0 + kKeyRows <= keys; j0 += kKeyRows) {
        group(std::integral_constant<int, kKeyRows>(), j0);
      }
    }
    for (; j0 < keys; ++j0) group(std::integral_constant<int, 1>(), j0);
  }
  if (!s.direct) {
    UnpackRows(dqb, T, D, Dp, dq, ld);
    UnpackRows(dkb, T, D, Dp, dk, ld);
    UnpackRows(dvb, T, D, Dp, dv, ld);
  }
}

}  // namespace

int64_t TiledAttentionPairProbs(int64_t time) {
  return PairProbsFloats(static_cast<int64_t>(hn::Lanes(DF())), time);
}

void TiledAttentionForward(const float* qkv, float* out, float* lse, float* probs, int64_t batch,
                           int64_t time, int64_t heads, int64_t head_dim, int threads) {
  const Shape s = ShapeOf(time, heads, head_dim);
  const int64_t pairs = batch * heads, ld = 3 * s.C, pair_probs = TiledAttentionPairProbs(time);
#pragma omp parallel for num_threads(threads) schedule(static) if (pairs > 1 && threads > 1)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t b = pair / heads, h = pair % heads;
    const float* q = qkv + b * time * ld + h * head_dim;
    ForwardPair(s, q, q + s.C, q + 2 * s.C, ld, out + b * time * s.C + h * head_dim, s.C,
                lse + pair * time, probs == nullptr ? nullptr : probs + pair * pair_probs);
  }
}

void TiledAttentionBackward(const float* qkv, const float* lse, const float* probs,
                            const float* grad_out, float* grad_qkv, int64_t batch, int64_t time,
                            int64_t heads, int64_t head_dim, int threads) {
  const Shape s = ShapeOf(time, heads, head_dim);
  const int64_t pairs = batch * heads, ld = 3 * s.C, pair_probs = TiledAttentionPairProbs(time);
#pragma omp parallel for num_threads(threads) schedule(static) if (pairs > 1 && threads > 1)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t b = pair / heads, h = pair % heads;
    const int64_t off = b * time * ld + h * head_dim, off_o = b * time * s.C + h * head_dim;
    const float* q = qkv + off;
    float* dq = grad_qkv + off;
    BackwardPair(s, q, q + s.C, q + 2 * s.C, ld, grad_out + off_o, s.C, lse + pair * time,
                 probs == nullptr ? nullptr : probs + pair * pair_probs, dq, dq + s.C,
                 dq + 2 * s.C);
  }
}

}  // namespace smallem::cpu

#endif  // SMALLEM_HAVE_HWY
