// Verdict: where a variant stands against the baseline or the reference
// curve, and the one rule both comparisons use to reach it
// (docs/equal-time.md § Four outcomes). A loss difference Δ in nats per
// byte, lower is better, with its standard error SE at ν degrees of freedom,
// is judged against the floor δ, the smallest difference that matters:
//
//   τ = max(δ, t₀.₉₇₅(ν)·SE)                     the row's threshold
//       (t_{1−α/2}(ν) at a level α other than 5 %: Holm's, server/analysis/holm.h)
//   better / worse  |Δ| > τ (Δ < 0 / Δ > 0): the 95 % interval Δ ± t₀.₉₇₅·SE
//                   excludes 0 and |Δ| exceeds δ;
//   equivalent      the 90 % interval Δ ± t₀.₉₅(ν)·SE lies inside (−δ, +δ)
//                   (Δ ± t_{1−a}(ν)·SE at another one-sided level a):
//                   two one-sided tests at 5 % each (TOST) show |Δ| < δ;
//   undecided       neither, or no SE (the noise was not measured).
//
// An undecided row with an SE says what this experiment could have missed
// (the larger end of its 95 % interval in absolute value) and how many
// seeds per arm would likely decide it (SeedsToDecide below). τ is measured
// by CompareAtEqualSteps (server/analysis/equal_steps.h) and at equal time
// by CompareAtEqualTime (server/analysis/equal_time.h).
//
// Thread-safety: free functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_VERDICT_H_
#define SMALLEM_SERVER_ANALYSIS_VERDICT_H_

#include <optional>
#include <string>

namespace smallem {

// kRefused: the two arms cannot be compared (their validation texts differ,
// or the baseline diverged). kDiverged: a seed of the arm diverged (its loss
// went non-finite): the arm has no mean and is not compared.
enum class Verdict {
  kBaseline, kBetter, kWorse, kEquivalent, kUndecided, kPending, kRefused, kDiverged
};
// "baseline", "better", "worse", "equivalent", "undecided", "pending",
// "not compared", "diverged".
const char* VerdictName(Verdict verdict);

// The level of one comparison.
inline constexpr double kAlpha = 0.05;
// The power SeedsToDecide plans for.
inline constexpr double kDecidePower = 0.8;
// The search of SeedsToDecide stops here.
inline constexpr int kMaxSeedsToDecide = 1000;

// One difference as the rule sees it.
struct Evidence {
  double delta = 0;           // nats per byte, lower is better
  std::optional<double> se;   // unset: the noise was not measured
  std::optional<double> df;   // ν, set with se
  double floor = 0.002;       // δ, > 0
  // How SE would shrink with n seeds per arm: SE(n)² = (SE² − fixed)·
  // seeds_now/n + fixed. seeds_now: the seeds per arm SE was measured at
  // (2/(1/n_V + 1/n_B) for a difference of two means); fixed_variance: a
  // part more seeds do not reduce (the curve's model error at equal time).
  double seeds_now = 1;
  double fixed_variance = 0;
  // The two-sided level of better/worse (τ uses t_{1−α/2}); below kAlpha
  // under Holm's correction or at a sequential look. The 95 % interval and
  // the missable effect keep kAlpha.
  double alpha = 0.05;
  // The one-sided level of each of the two one-sided tests of equivalence
  // (the interval Δ ± t_{1−level}·SE); below kAlpha at a sequential look.
  double equivalence_alpha = 0.05;
};

// Evidence judged.
struct Judgement {
  Verdict verdict = Verdict::kUndecided;  // kBetter, kWorse, kEquivalent or kUndecided
  double tau = 0;                         // max(δ, t_{1−α/2}·SE); δ without SE
  double alpha = kAlpha;                  // Evidence::alpha
  double delta_over_tau = 0;              // Δ/τ, with Δ's sign
  std::optional<double> tost_low, tost_high;  // the 90 % interval Δ ∓ t₀.₉₅·SE
  // Undecided with an SE: max(|Δ − t₀.₉₇₅·SE|, |Δ + t₀.₉₇₅·SE|), the
  // largest effect the 95 % interval does not rule out.
  std::optional<double> missable;
  // Undecided with an SE: SeedsToDecide; unset past kMaxSeedsToDecide
  // (decide_beyond_max) or when the fixed part alone is too wide.
  std::optional<int> seeds_to_decide;
  bool decide_beyond_max = false;
  // For people: why undecided ("noise not measured", or what it could miss
  // and the seeds that would decide), or the equivalence margin.
  std::string reason;
};

// Judges `evidence` by the rule above. REQUIRES: floor > 0, and df > 0 when
// se is set (CHECKed).
Judgement Judge(const Evidence& evidence);

// The smallest n ≥ 2 seeds per arm with which, if the true difference were
// the measured Δ and the noise as measured, the verdict would be reached
// with probability ≈ kDecidePower (z = z₀.₈ = 0.8416, SE(n) as in
// Evidence, ν(n) = 2n − 2):
//   |Δ| > δ:  |Δ| − z·SE(n) > max(δ, t_{1−α/2}(ν(n))·SE(n))  (better / worse)
//   |Δ| ≤ δ:  |Δ| + (t₀.₉₅(ν(n)) + z)·SE(n) < δ             (equivalent)
// nullopt when no n ≤ kMaxSeedsToDecide does. REQUIRES: evidence.se set.
std::optional<int> SeedsToDecide(const Evidence& evidence);

// |Δ|/τ for people: two decimals below 10 ("1.04τ"), one below 100
// ("24.5τ"), none from 100 on ("184τ").
std::string FormatTauMultiple(double delta_over_tau);

// For people: "baseline", "better (5.00τ)", "worse (1.30τ)", "equivalent
// (within ±0.0020)", "undecided: " followed by `reason`, "pending: ",
// "not compared: " or "diverged: " followed by `reason`. REQUIRES:
// `delta_over_tau` is set when `verdict` is kBetter or kWorse (CHECKed).
std::string VerdictText(Verdict verdict, const std::optional<double>& delta_over_tau,
                        const std::string& reason);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_VERDICT_H_
