// Sequential seeds (docs/equal-time.md § Sequential seeds): a comparison
// looked at after n₁ < n₂ < … < n_K seeds per arm, stopping an arm as soon
// as its verdict is better, worse or equivalent, and judged at each look at
// group-sequential levels (server/analysis/group_sequential.h) so that the
// chance of a false verdict over all the looks stays at 5 %:
//
//   information fraction   t_k = n_k / n_K
//   better / worse         two-sided, the α = kAlpha design of `shape`:
//                          level α_k = 2·(1 − Φ(c_k)) on the t scale
//   equivalent             each one-sided test at the level of the 2·kAlpha
//                          design: a_k = 1 − Φ(c′_k)
//
// One look at n_K seeds is the fixed design (α₁ = 0.05, a₁ = 0.05). An arm
// may also stop undecided for futility (ConditionalPower below).
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_
#define SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/group_sequential.h"

namespace smallem {

struct SequentialDesign {
  std::vector<int> looks;  // seeds per arm at each look: strictly increasing, first ≥ 2
  BoundaryShape shape = BoundaryShape::kOBrienFleming;
};

// The levels of one look.
struct LookLevel {
  int seeds = 0;                 // n_k
  double alpha = 0;              // two-sided level of better/worse
  double equivalence_alpha = 0;  // one-sided level of each test of equivalence
};

// The levels of each look of `design`. InvalidArgument when its looks are
// not strictly increasing from 2 or more.
absl::StatusOr<std::vector<LookLevel>> LookLevels(const SequentialDesign& design);

// The chance that an arm undecided at a look with `seeds` per arm is decided
// at the last look (`last` = that look's levels), if the difference keeps
// its current estimate Δ (conditional power under the current trend): with
// f = seeds/last.seeds, SE_K = SE·√f and the final estimate
// Δ_K ~ N(Δ, ((1 − f)·SE·√(f/(1 − f)))²),
//   P(|Δ_K| > max(δ, t_{1−α_K/2}(ν_K)·SE_K)) + P(|Δ_K| < δ − t_{1−a_K}(ν_K)·SE_K),
// ν_K = 2·last.seeds − 2. An arm below a futility threshold of it may stop
// undecided: stopping early for futility never adds a false verdict.
// REQUIRES: se > 0, 2 ≤ seeds < last.seeds.
double ConditionalPower(double delta, double se, int seeds, const LookLevel& last, double floor);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_
