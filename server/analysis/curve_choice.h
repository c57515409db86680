// Which model the equal-time reference curve uses, how well it predicts
// budgets it did not see, and how uncertain it is (docs/equal-time.md
// § The reference curve):
//
//  * Noise: σ pooled over the reference seeds and the compared arms (every
//    arm with ≥ 2 seeds on the class), df Σ(nᵢ − 1); a point flagged
//    in_arms_noise is already in the arms' σ and not pooled again.
//  * Choice (ChooseReferenceCurve), with k complete budgets:
//      k = 2: the chord in log time, with a note giving its bias bound;
//      k ≥ 3: the first form, in order log-linear, power law, plateau power
//             law and broken power law (the last two with k ≥ 5), whose
//             residuals are within the points' noise; else the candidate
//             with the smallest root-mean-square leave-one-out miss among
//             PCHIP in log time and each form made exact at the points
//             (kFitThroughPoints) — PCHIP with k = 3 — with a note.
//    The residual test: point i has variance σ²/nᵢ; χ² = Σ rᵢ²·nᵢ/σ² with
//    k − p degrees of freedom; rejected when χ²/(k − p) exceeds the 0.99
//    quantile of F(k − p, df_σ), or, with k = p, unless it passes through
//    the points (every |rᵢ|/(σ/√nᵢ) ≤ 0.1: a form held off a point by its
//    bounds would bias R at the very point it was given). Without any σ the
//    fit is accepted untested.
//  * Leave-one-out: for each interior budget, the same model refitted to
//    the others (the chord where the others are too few for the form)
//    predicts it; miss = measured − predicted, and, with σ, the miss's
//    variance from the seeds' noise alone: σ²/nᵢ plus Σⱼ δⱼ², δⱼ the change
//    of the prediction when point j's mean moves by σ/√nⱼ.
//  * Model error (ModelErrorAt): the curve model is itself measured. For t
//    between budgets a and a + 1, the left-out misses at those of the two
//    that are interior (and refitted with the model itself) give
//    ME² = max(0, mean(missᵢ² − varianceᵢ)), with as many degrees of
//    freedom as misses; it enters τ_time beside SE_R.
//  * SE_R(t)² = SE_loss(t)² + SE_time(t)², its two sources kept apart
//    because their degrees of freedom differ:
//    SE_loss: kBootstrapResamples parametric bootstrap resamples
//    (mt19937_64 seeded with kBootstrapSeed, so a report is reproducible):
//    point i's mean loss Lᵢ + σ/√nᵢ·zᵢ with the pooled σ (a 2-seed
//    nonparametric resample would know its budget's spread from one degree
//    of freedom), the model refitted to each (TimeCurve::RefitNear: from
//    the curve's own fit), their standard deviation at t; df of σ. Zero
//    without σ. The draws are moment-matched: each point's centred, made
//    orthogonal to the earlier points' and scaled to sample variance 1, so
//    that the bootstrap is exact wherever R is linear in the points' means
//    (plain draws of a fixed seed bias it the same way in every report).
//    SE_time: the points' mean times are measured too: Σᵢ δᵢ(t)², δᵢ the
//    change of R(t) (refitted from the curve's fit) when point i's time tᵢ
//    moves by its standard error
//    tᵢ·cv/√nᵢ (cv the relative sd of training time pooled over every arm
//    and budget, equal_time.h); df that of cv. None without cv.
//
// Thread-safety: pure functions; CurveBootstrap is an immutable value.
#ifndef SMALLEM_SERVER_ANALYSIS_CURVE_CHOICE_H_
#define SMALLEM_SERVER_ANALYSIS_CURVE_CHOICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/reference_curve.h"

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
  // False when the others were too few for the model and the chord stood in.
  bool same_model = true;
  // The miss's variance from the seeds' noise alone (set with σ).
  std::optional<double> noise_variance = std::nullopt;
  // Filled by the caller that knows the noise (equal_time.h).
  std::optional<double> tau = std::nullopt;
  bool exceeds = false;  // |miss| > tau
};

struct CurveChoice {
  TimeCurve curve;
  // Per-seed noise pooled over the reference seeds and the compared arms.
  std::optional<double> sigma = std::nullopt;
  int sigma_df = 0;
  // "reference seeds", "the compared arms", "reference seeds and the
  // compared arms" or "".
  std::string sigma_source = "";
  // χ²/(k − p) of the form tried last (or chosen), when tested with k > p.
  std::optional<double> misfit = std::nullopt;
  std::vector<LeftOut> left_out = {};  // the chosen model's leave-one-out misses
  std::vector<std::string> notes = {};
};

// Chooses the model for `points` (≥ 2, as TimeCurve::Create). `arms_sigma`
// (with its df: the compared arms' pooled σ) is pooled with the reference
// seeds' own.
absl::StatusOr<CurveChoice> ChooseReferenceCurve(std::vector<CurvePoint> points,
                                                 std::optional<double> arms_sigma, int arms_df);

// The leave-one-out misses of `curve`'s model at its interior budgets; with
// `sigma`, each with its noise variance.
std::vector<LeftOut> LeaveOneOut(const TimeCurve& curve,
                                 std::optional<double> sigma = std::nullopt);

// The model error of `choice` at `seconds` (above): a variance and its
// degrees of freedom (0 and 0 where no interior budget bounds t's span).
struct ModelError {
  double variance = 0;
  int df = 0;
};
ModelError ModelErrorAt(const CurveChoice& choice, double seconds);

class CurveBootstrap {
 public:
  // No resamples without `sigma`; no time term without `time_cv` > 0.
  static CurveBootstrap Run(const TimeCurve& curve, std::optional<double> sigma,
                            double time_cv = 0, int time_df = 0,
                            int resamples = kBootstrapResamples, uint64_t seed = kBootstrapSeed);
  // SE_R(seconds) = √(SE_loss² + SE_time²) as above; 0 without σ.
  // REQUIRES: seconds > 0.
  double Se(double seconds) const;
  double SeLoss(double seconds) const;
  double SeTime(double seconds) const;
  int resamples() const { return static_cast<int>(curves_.size()); }
  // SE_time's degrees of freedom (0 without a term).
  int time_df() const { return time_df_; }

 private:
  std::vector<TimeCurve> curves_;
  std::vector<TimeCurve> base_;         // the curve itself (none without σ)
  std::vector<TimeCurve> time_curves_;  // one per point with a measured time spread
  int time_df_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CURVE_CHOICE_H_
