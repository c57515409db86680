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
// may also stop undecided for futility (FutilityStop below): non-binding,
// the levels above do not count on it, so it never adds a false verdict.
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_
#define SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_

#include <optional>
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

// When an arm undecided at a look stops for futility: at look `from_look`
// (1-based) or later, before the last, once its ConditionalPower falls
// below `below`. The first look (3 seeds per arm, ν = 4) is left out by
// default: its trend is too noisy, stopping there costs the most power per
// run saved (docs/equal-time.md § Sequential seeds has the measurements).
struct FutilityRule {
  double below = 0;   // 0: never stop for futility
  int from_look = 2;  // ≥ 1
};

// The rule the service applies (server/queue/sequential_looks.h) and the
// calibration measures, with looks [3, 5, 7, 9, 11]: on the mixture of
// effects, the fixed 10-seed design's power with about 31 % fewer runs.
inline constexpr FutilityRule kFutility{.below = 0.1, .from_look = 2};

// The conditional power that stops an arm undecided at look `look`
// (0-based index into `levels`, the design's LookLevels) with difference
// `delta` and standard error `se`, or nullopt when it goes on: always at
// the last look (undecided there is the design's own end), before
// rule.from_look, without an SE, or with ConditionalPower ≥ rule.below.
// REQUIRES: look < levels.size().
std::optional<double> FutilityStop(const FutilityRule& rule, const std::vector<LookLevel>& levels,
                                   size_t look, double delta, std::optional<double> se,
                                   double floor);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_SEQUENTIAL_H_
