// Newton–Schulz orthogonalization for Muon: schedules of odd quintic
// polynomials and the batched iteration that applies them to stacks of
// same-shape matrices (docs/muon.md; docs/muon.md).
//
// Each iteration maps X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ, i.e. applies
// p(σ) = a·σ + b·σ³ + c·σ⁵ to every singular value σ of X while keeping its
// singular vectors; a schedule composes such polynomials so that, after a
// Frobenius normalization that puts every σ in [0, 1], the singular values
// worth keeping end near 1. Three matrix products per iteration.
//
// The iteration runs on the wide orientation (rows ≤ cols) so A is the small
// Gram matrix; a tall matrix is transposed logically, through the products'
// transpose flags, never in memory: for a tall Y the same map is
// Y ← a·Y + Y·(b·A + c·A²)ᵀ with A = Yᵀ·Y.
#ifndef SMALLEM_ENGINE_OPTIM_NEWTON_SCHULZ_H_
#define SMALLEM_ENGINE_OPTIM_NEWTON_SCHULZ_H_

#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace smallem {

// One iteration's polynomial p(x) = a·x + b·x³ + c·x⁵.
struct NewtonSchulzStep {
  double a = 0, b = 0, c = 0;
  double operator()(double x) const { return x * (a + x * x * (b + c * x * x)); }
};
using NewtonSchulzSchedule = std::vector<NewtonSchulzStep>;

// `muon`: 8 × (3.4445, −4.7750, 2.0315) then 2 × (2, −1.5, 0.5).
const NewtonSchulzSchedule& StandardNewtonSchulzSchedule();

// `muon:short`: the 4-iteration table DeriveMinimaxSchedule(0.02, 4) yields
// (docs/muon.md), applied with a norm margin of kShortNormMargin: to
// X/(1.01·‖X‖_F) rather than X/‖X‖_F (WithNormMargin folds the 1/1.01 into
// the first step). The table is tuned so tightly to [0.02, 1] that a
// singular value rounded just above the norm would blow up (1 + 1e-3 ends
// at 2.77, 1 + 5e-3 at 1e7); with the margin every singular value with
// σ/‖X‖_F in [kShortScheduleLower, 1]·kShortNormMargin = [0.0202, 1.01]
// ends in [kShortBandLow, kShortBandHigh] = 1 ± 5.1e-4 (exact arithmetic;
// f32 rounding adds about 2e-7 on a 32 × 48 matrix).
const NewtonSchulzSchedule& ShortNewtonSchulzSchedule();
inline constexpr double kShortScheduleLower = 0.02;
inline constexpr double kShortNormMargin = 1.01;
inline constexpr double kShortBandLow = 0.99949;
inline constexpr double kShortBandHigh = 1.00051;

// `schedule` applied to X/margin instead of X: the first step's
// coefficients become (a/m, b/m³, c/m⁵), so that
// ApplySchedule(WithNormMargin(s, m), x) = ApplySchedule(s, x/m) without an
// extra pass over the matrix. REQUIRES: margin > 0, schedule not empty.
NewtonSchulzSchedule WithNormMargin(const NewtonSchulzSchedule& schedule, double margin);

// The scalar composite: what the schedule does to one singular value of the
// Frobenius-normalized matrix (σ/‖X‖_F).
double ApplySchedule(const NewtonSchulzSchedule& schedule, double x);

// A Polar-Express-style greedy minimax schedule: starting from [lower, 1],
// iteration t takes the odd quintic p_t that minimizes max |1 − p_t(x)| over
// the current interval [l_t, u_t] (Remez exchange on the four alternation
// points l_t, the two critical points of p_t, u_t), and the next interval is
// p_t's exact image [min p_t, max p_t]. Deterministic; band_low/high is the
// final image of [lower, 1], the band every such singular value ends in.
struct MinimaxSchedule {
  NewtonSchulzSchedule steps;
  double band_low = 0, band_high = 0;
};
MinimaxSchedule DeriveMinimaxSchedule(double lower, int iterations);

// Device scratch for Orthogonalize on `batch` stacked (rows, cols) matrices;
// s = min(rows, cols).
struct NewtonSchulzWorkspace {
  Tensor next;     // (batch, rows, cols): the iteration's other buffer
  Tensor gram;     // (batch, s, s)
  Tensor poly;     // (batch, s, s)
  Tensor norm_sq;  // (batch): squared Frobenius norms
};
// Floats a workspace needs (each piece padded to 64 bytes).
int64_t NewtonSchulzWorkspaceFloats(int64_t batch, int64_t rows, int64_t cols);

// A float count rounded up to a multiple of 16 (64 bytes): where each of the
// optimizer's workspace regions starts.
inline int64_t PaddedFloats(int64_t floats) { return (floats + 15) / 16 * 16; }
// Carves a workspace from `base`, which holds NewtonSchulzWorkspaceFloats
// floats of backend memory.
NewtonSchulzWorkspace CarveNewtonSchulzWorkspace(float* base, int64_t batch, int64_t rows,
                                                 int64_t cols);

// Replaces each matrix of x — (batch, rows, cols), or (rows, cols) for one —
// by its orthogonalization: Frobenius-normalized on its own (a zero matrix
// stays zero), then the schedule's iterations, all `batch` matrices in one
// batched product per step. A matrix stacked with others gets the numbers it
// would get alone on a backend whose batched product computes each item as
// it would alone (the 1-thread CPU backend; with more threads the CPU
// backend cuts a lone product into slabs, which may move the last bit).
void Orthogonalize(Backend& backend, Tensor x, const NewtonSchulzSchedule& schedule,
                   const NewtonSchulzWorkspace& workspace);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OPTIM_NEWTON_SCHULZ_H_
