// Group-sequential boundaries (docs/equal-time.md § Looks): the critical
// values a test compares its statistic with at each of K pre-registered
// looks so that, under no difference, the chance of crossing at ANY look is
// α — the price of looking again before the last seed.
//
// The statistic at look k is Z_k = W(t_k)/√t_k, W a standard Brownian
// motion and t_k the information fraction of look k (seeds so far over
// seeds at the last look; 0 < t_1 < … < t_K = 1). Two classical shapes:
//   Pocock             c_k = c            (the same bar at every look)
//   O'Brien–Fleming    c_k = c/√t_k       (strict early, near z₁₋α/₂ at the end)
// with c found by bisection on the exact two-sided crossing probability
//   P(∃k: |Z_k| ≥ c_k) = α,
// computed by recursive numerical integration of the density of W(t_k) on
// the continuation region (Armitage, McPherson and Rowe 1969): Simpson's
// rule on a fine grid, each step convolving with the N(0, t_k − t_{k−1})
// increment. Equally spaced looks at α = 0.05 give Pocock 2.178 (2 looks),
// 2.289 (3) and O'Brien–Fleming 3.471, 2.454, 2.004 (3 looks).
//
// For a t statistic with ν degrees of freedom at look k, TBoundary keeps the
// nominal level of c_k: t_{1 − p_k/2}(ν), p_k = 2·(1 − Φ(c_k)).
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_GROUP_SEQUENTIAL_H_
#define SMALLEM_SERVER_ANALYSIS_GROUP_SEQUENTIAL_H_

#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

enum class BoundaryShape { kPocock, kOBrienFleming };
// "pocock", "obrien-fleming".
const char* BoundaryShapeName(BoundaryShape shape);

// P(∃k: |Z_k| ≥ z[k]) under no difference. REQUIRES: fractions strictly
// increasing in (0, 1], z.size() == fractions.size(), z[k] > 0 (CHECKed).
double CrossingProbability(const std::vector<double>& fractions, const std::vector<double>& z);

// The boundaries c_k of `shape` at `fractions` whose crossing probability is
// `alpha` (two-sided), to 1e-7 in c. InvalidArgument when the fractions are
// not strictly increasing in (0, 1] or alpha is outside (0, 1).
absl::StatusOr<std::vector<double>> GroupSequentialBoundaries(
    BoundaryShape shape, const std::vector<double>& fractions, double alpha);

// The two-sided nominal level of a normal boundary z: 2·(1 − Φ(z)).
double NominalLevel(double z);

// The t boundary with the nominal level of z at `df` > 0 degrees of freedom.
double TBoundary(double z, double df);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_GROUP_SEQUENTIAL_H_
