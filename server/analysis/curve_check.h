// Which model the equal-time reference curve uses, how well it predicts
// budgets it did not see, and how uncertain it is (docs/equal-time.md
// § The reference curve):
//
//  * Choice (ChooseReferenceCurve), with k complete budgets:
//      k = 2: the chord in log time, with a note giving its bias bound;
//      k ≥ 3: the power law L∞ + A·(t/t_ref)^(−α) when its residuals are
//             within the points' noise; else (k ≥ 5) the plateau power law
//             when its are; else the candidate with the smallest
//             worst leave-one-out miss among PCHIP in log time and each form
//             made exact at the points (kFitThroughPoints) — PCHIP with
//             k = 3, where no budget can be left out of a fit — with a note.
//    The residual test: point i has variance σ²/nᵢ (σ pooled over the
//    reference seeds, else the comparison's σ); χ² = Σ rᵢ²·nᵢ/σ² with
//    k − p degrees of freedom; rejected when χ²/(k − p) exceeds the 0.99
//    quantile of F(k − p, df_σ), or, with k = p, unless it passes through
//    the points (every |rᵢ|/(σ/√nᵢ) ≤ 0.1: a form held off a point by its
//    bounds would bias R at the very point it was given). Without any σ the
//    fit is accepted untested.
//  * Leave-one-out: for each interior budget, the same model refitted to
//    the others (the chord where the others are too few for the form)
//    predicts it; miss = measured − predicted.
//  * Bootstrap: kBootstrapResamples resamples of the reference seeds within
//    each budget (mt19937_64 seeded with kBootstrapSeed, so a report is
//    reproducible), the model refitted to each; SE_R(t) = their standard
//    deviation at t times √(n/(n − 1)) (n seeds per budget; the plain
//    bootstrap's variance is short by (n − 1)/n). Zero with one seed.
//
// Thread-safety: pure functions; CurveBootstrap is an immutable value.
#ifndef SMALLEM_SERVER_ANALYSIS_CURVE_CHECK_H_
#define SMALLEM_SERVER_ANALYSIS_CURVE_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/time_curve.h"

namespace smallem {

inline constexpr int kBootstrapResamples = 200;
inline constexpr uint64_t kBootstrapSeed = 20240611;
inline constexpr double kResidualTestLevel = 0.01;

struct LeftOut {
  Budget budget;
  double seconds = 0;
  double measured = 0;   // the budget's mean loss
  double predicted = 0;  // R from the other budgets
  double miss = 0;       // measured − predicted
  // Filled by the caller that knows the noise (time_comparator.h).
  std::optional<double> tau;
  bool exceeds = false;  // |miss| > tau
};

struct CurveChoice {
  TimeCurve curve;
  std::optional<double> sigma;  // per-seed noise of the points used by the test
  int sigma_df = 0;
  std::string sigma_source;     // "reference seeds", "the compared arms" or ""
  // χ²/(k − p) of the form tried last (or chosen), when tested with k > p.
  std::optional<double> misfit;
  std::vector<LeftOut> left_out;  // the chosen model's leave-one-out misses
  std::vector<std::string> notes;
};

// Chooses the model for `points` (≥ 2, as TimeCurve::Create). `fallback_sigma`
// (with its df) stands in when the reference seeds measure no noise.
absl::StatusOr<CurveChoice> ChooseReferenceCurve(std::vector<CurvePoint> points,
                                                 std::optional<double> fallback_sigma,
                                                 int fallback_df);

// The leave-one-out misses of `curve`'s model at its interior budgets.
std::vector<LeftOut> LeaveOneOut(const TimeCurve& curve);

class CurveBootstrap {
 public:
  static CurveBootstrap Run(const TimeCurve& curve, int resamples = kBootstrapResamples,
                            uint64_t seed = kBootstrapSeed);
  // SE_R(seconds) as above; 0 without resamples. REQUIRES: seconds > 0.
  double Se(double seconds) const;
  int resamples() const { return static_cast<int>(curves_.size()); }

 private:
  std::vector<TimeCurve> curves_;
  double inflation_ = 1;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CURVE_CHECK_H_
