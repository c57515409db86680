// Equal-time comparison (docs/equal-time.md, docs/equal-time.md): each
// variant against what the reference curve reaches in the variant's own
// training time. A variant can win per step and lose per minute.
//
// The rules, for a plan with a reference curve:
//  * The runs of the plan's variants are gathered exactly as at equal steps
//    (CompareAtEqualSteps: one device class, complete arms, the noise
//    model); TimeReport::steps holds that comparison.
//  * Training times are compared only within one device class: the curve is
//    built from the reference runs on the class the variants are compared
//    on. When reference runs have finished only on other classes, the
//    comparison is refused (FailedPrecondition naming both classes).
//  * The curve's model, its leave-one-out check, its model error ME(t) and
//    its parametric bootstrap SE_R(t) come from server/analysis/curve_choice.h,
//    with σ pooled over the reference seeds and the compared arms (σ_all,
//    df_all), each run once: the reference point at the compared budget of
//    the reference's shared variant is that variant's runs, so it joins
//    that arm (their union by seed) rather than being pooled twice.
//  * Per variant: t = mean training seconds of its seeds; R(t) from the
//    curve; Δt = mean loss − R(t) in nats per byte, lower is better;
//      SE_V = σ_all/√n_V (df_all);
//      SE_t = t·cv/√n_V, cv the seed-to-seed sd of training time relative
//           to its mean, pooled over every arm and reference budget with ≥ 2
//           seeds, each run once as σ_all (df_cv = Σ(nᵢ − 1); 0 without any);
//      SE = √(SE_V² + SE_R(t)² + (R′(t)·SE_t)² + ME(t)²), df ν the smaller
//           of df_all (σ_all: SE_V, SE_R's loss part) and df_cv (cv: SE_R's
//           time part, SE_t) among those whose terms are > 0 — conservative:
//           Welch–Satterthwaite's ν is never below it; ME, a bias bound, has
//           none;
//      τ_time = max(floor, t₀.₉₇₅(df)·SE); 95 % interval Δt ± t₀.₉₇₅·SE;
//    the four outcomes of server/analysis/verdict.h on (Δt, SE, ν):
//    `better`/`worse` when |Δt| > τ_time, stated as a multiple of it,
//    `equivalent` when the 90 % interval lies inside ±floor, else
//    `undecided` (seeds to decide scale every term but ME(t)). With no noise
//    measured anywhere τ_time is the floor and the row is undecided. Every row is compared with the
//    curve, the baseline's included; a row refused at equal steps
//    (different validation texts) is refused here too.
//  * Outside the curve's measured span R(t) is extrapolated; the row is
//    flagged and a note says how far.
//  * Each leave-one-out miss is judged against the τ of a variant measured
//    there with the budget's own seeds: max(floor, t₀.₉₇₅·√(σ²/n + SE_R²));
//    a note names the budgets whose miss exceeds it.
//  * A row stays pending while its seeds are unfinished, while the baseline
//    is incomplete or while fewer than two reference budgets have all their
//    seeds finished on the class.
//
// Thread-safety: free functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_EQUAL_TIME_H_
#define SMALLEM_SERVER_ANALYSIS_EQUAL_TIME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/equal_steps.h"
#include "server/analysis/curve_choice.h"
#include "server/analysis/reference_runs.h"

namespace smallem {

// The seed-to-seed sd of training time relative to its mean, pooled over
// every compared arm and reference budget with two or more seeds.
struct TimeSpread {
  double cv = 0;
  int df = 0;  // Σ(nᵢ − 1); 0: not measured
};

// One variant at equal time.
struct TimeRow {
  std::string variant;
  Verdict verdict = Verdict::kPending;  // never kBaseline: every row meets the curve
  // Per finished seed on the compared class, in the plan's seed order (the
  // same seeds as TimeReport::steps' row): for plots.
  std::vector<double> seconds;
  std::vector<double> losses;
  std::vector<int64_t> steps;  // ComparedRun::steps, else the budget's steps, else 0
  // Set when the row is compared.
  std::optional<double> mean_seconds;  // t
  std::optional<double> mean_loss;
  std::optional<double> reference_loss;  // R(t)
  std::optional<double> delta;           // mean loss − R(t), nats/byte
  std::optional<double> slope;           // R′(t), nats/byte per second
  std::optional<double> se_variant;      // SE_V
  std::optional<double> se_reference;    // SE_R(t), bootstrap
  std::optional<double> se_seconds;      // SE_t
  std::optional<double> se_model;        // ME(t), the curve's model error
  std::optional<double> se;              // the combined SE (unset: no noise measured)
  std::optional<double> df;
  std::optional<double> t_quantile;
  std::optional<double> ci_low, ci_high;
  std::optional<double> tau;             // τ_time
  double alpha = kAlpha;                 // the level better/worse was judged at (Holm)
  std::optional<double> delta_over_tau;  // Δt / τ, with Δt's sign
  std::optional<double> tost_low, tost_high;  // the 90 % interval
  std::optional<double> missable_effect;      // undecided (ReportRow's)
  std::optional<int> seeds_to_decide;
  bool decide_beyond_max = false;
  bool extrapolated = false;
  double span_ratio = 1;       // Interpolated::span_ratio
  std::string pending_reason;  // set on pending, refused, undecided and equivalent rows

  // "better (2.50τ)", "worse (1.30τ)", "equivalent (within ±0.0020)",
  // "undecided: …", "pending: …", "not compared: …".
  std::string VerdictText() const;
};

struct TimeReport {
  Report steps;                    // the equal-steps comparison of the same runs
  std::string device_class;        // the class compared (steps.device_class, or the curve's)
  std::vector<CurvePoint> curve;   // the complete reference budgets on that class, by budget
  int curve_budgets = 0;           // budgets the reference plan asks for
  // The model through them (≥ 2 budgets), its leave-one-out misses (with
  // their τ) and its bootstrap.
  std::optional<CurveChoice> choice;
  std::optional<CurveBootstrap> bootstrap;
  TimeSpread time_spread;  // the training time's relative spread (SE_t)
  std::vector<TimeRow> rows;       // parallel to steps.rows
  std::vector<std::string> notes;  // about the equal-time comparison, in order of importance

  // True when no time row is pending.
  bool Complete() const;
};

// Compares `runs` at equal time according to `plan`. Errors:
// InvalidArgument as CompareAtEqualSteps, and for duplicate reference runs
// or a degenerate curve (TimeCurve::Create); FailedPrecondition when the
// plan has no reference curve, or when the reference runs finished only on
// another device class than the variants.
absl::StatusOr<TimeReport> CompareAtEqualTime(const ComparisonPlan& plan,
                                              const std::vector<ComparedRun>& runs);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_EQUAL_TIME_H_
