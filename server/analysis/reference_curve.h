// The equal-time reference curve R(t) as a function (docs/equal-time.md
// § The reference curve): what the reference model reaches after t seconds
// of training, from complete runs of increasing length. Which model is used
// is chosen by ChooseReferenceCurve (server/analysis/curve_choice.h); this
// file holds the models:
//
//  * kChord: linear in log time between consecutive points (ordered by
//    time): for t_i ≤ t ≤ t_{i+1}, u = (ln t − ln t_i)/(ln t_{i+1} − ln t_i),
//    R(t) = L_i + u·(L_{i+1} − L_i). Biased towards "better" between points
//    where the curve is convex; the model for two points.
//  * kPchip: a monotone piecewise-cubic (PCHIP, server/analysis/pchip.h) in
//    log time through the points.
//  * kFit: a parametric form fitted to the points (server/analysis/curve_fit.h).
//  * kFitThroughPoints: the form plus a PCHIP in log time of its residuals
//    (rᵢ = Lᵢ − F(tᵢ)): exact at the points, the form's shape between them;
//    for a form whose residuals exceed the points' noise.
//
// Outside [t_first, t_last] the value is flagged extrapolated, with
// span_ratio = t/t_first (< 1) or t/t_last (> 1). There the chord extends
// its end segment, PCHIP its end tangent, a fit its form (kFitThroughPoints
// with the end residual held constant).
//
// Thread-safety: TimeCurve is an immutable value.
#ifndef SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_
#define SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/curve_fit.h"
#include "server/analysis/pchip.h"
#include "runspec/run_spec.h"

namespace smallem {

// One budget of the reference curve.
struct CurvePoint {
  Budget budget;
  double seconds = 0;  // mean training seconds of the budget's seeds
  double loss = 0;     // mean val nats/byte of the budget's seeds
  // Per seed, in the reference plan's seed order (for plots and the bootstrap).
  std::vector<double> seed_seconds;
  std::vector<double> seed_losses;
  std::vector<int64_t> seed_steps;  // ComparedRun::steps, else the budget's steps, else 0
  // Its runs are (some of) a compared arm's, whose spread the arms' σ given
  // to ChooseReferenceCurve already holds: not pooled again
  // (equal_time.h).
  bool in_arms_noise = false;
};

enum class CurveModel { kChord, kPchip, kFit, kFitThroughPoints };
// "chord in log time", "PCHIP in log time", "fit", "fit through the points".
const char* CurveModelName(CurveModel model);

// R(t) at one time.
struct Interpolated {
  double value = 0;           // nats/byte
  double slope = 0;           // dR/dt, nats/byte per second
  bool extrapolated = false;  // t outside [first point's time, last point's time]
  double span_ratio = 1;      // t / nearest end's time when extrapolated; 1 inside
};

class TimeCurve {
 public:
  // The chord through `points` (any order). InvalidArgument when there are
  // fewer than two, a time is not a positive finite number, a loss is not
  // finite, or two points have the same time.
  static absl::StatusOr<TimeCurve> Create(std::vector<CurvePoint> points);
  // `model` (with `form` for the fits) through `points`: Create's errors, and
  // FailedPrecondition when the form has more parameters than there are
  // points, or no decreasing fit exists.
  static absl::StatusOr<TimeCurve> Build(std::vector<CurvePoint> points, CurveModel model,
                                         Form form = Form::kPowerLaw);
  // The same model (and form) refitted to other points (leave-one-out,
  // bootstrap).
  absl::StatusOr<TimeCurve> Refit(std::vector<CurvePoint> points) const {
    return Build(std::move(points), model_, form_);
  }
  // This fit (kFit) made exact at its points: kFitThroughPoints with the
  // same parameters, without fitting again. REQUIRES: model() == kFit.
  TimeCurve ThroughPoints() const;
  // As Refit, for points close to these (a bootstrap resample, a point moved
  // by its standard error): a fit starts from this curve's parameters
  // (RefitFormNear, a local search) instead of searching globally; the
  // global search stands in where the local one finds no decreasing fit.
  absl::StatusOr<TimeCurve> RefitNear(std::vector<CurvePoint> points) const;

  // By increasing time.
  const std::vector<CurvePoint>& points() const { return points_; }
  double first_seconds() const { return points_.front().seconds; }
  double last_seconds() const { return points_.back().seconds; }
  CurveModel model() const { return model_; }
  Form form() const { return form_; }
  // The fitted form (kFit, kFitThroughPoints).
  const std::optional<FormFit>& fit() const { return fit_; }
  // Lᵢ − R(tᵢ) of the model before any correction: the form's residuals for
  // the fits, zeros for the interpolations.
  std::vector<double> Residuals() const;
  // "power law fit: L∞ = 1.2000, A = 0.3000 at t_ref = 60.0 s, α = 0.500"
  // or the model's name.
  std::string Describe() const;

  // R(seconds); REQUIRES: seconds > 0 and finite (CHECKed).
  Interpolated Interpolate(double seconds) const;

 private:
  TimeCurve(std::vector<CurvePoint> points, CurveModel model, Form form)
      : points_(std::move(points)), model_(model), form_(form) {}
  double Inner(double seconds, double* slope) const;
  // Build, the fit started from `near` when given.
  static absl::StatusOr<TimeCurve> BuildFrom(std::vector<CurvePoint> points, CurveModel model,
                                             Form form, const FormFit* near);

  std::vector<CurvePoint> points_;
  CurveModel model_;
  Form form_;
  std::optional<FormFit> fit_;
  std::optional<Pchip> pchip_;  // of the losses (kPchip) or the residuals, in ln t
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_
