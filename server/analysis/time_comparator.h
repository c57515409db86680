// Equal-time comparison (DESIGN.md § Comparisons, docs/equal-time.md): each
// variant against what the reference curve reaches in the variant's own
// training time. A variant can win per step and lose per minute.
//
// The rules, for a plan with a reference curve:
//  * The runs of the plan's variants are gathered exactly as at equal steps
//    (CompareAtEqualSteps: one device class, complete arms, τ from the
//    baseline's replicates); TimeReport::steps holds that comparison.
//  * Training times are compared only within one device class: the curve is
//    built from the reference runs on the class the variants are compared
//    on. When reference runs have finished only on other classes, the
//    comparison is refused (FailedPrecondition naming both classes).
//  * Per variant: t = mean training seconds of its seeds; R(t) from the
//    curve (server/analysis/reference_curve.h); Δt = mean loss − R(t) in nats per
//    byte, lower is better; verdict `better`/`worse` when |Δt| > τ (the same
//    τ as at equal steps), stated as a multiple of τ, else `within noise`
//    (server/analysis/verdict.h).
//    Every row is compared with the curve, the baseline's included.
//  * Outside the curve's measured span R(t) is extrapolated along the
//    nearest segment; the row is flagged and a note says how far.
//  * A row stays pending while its seeds are unfinished, while τ is unknown
//    (baseline incomplete) or while fewer than two reference budgets have
//    all their seeds finished on the class.
//
// Thread-safety: free functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_TIME_COMPARATOR_H_
#define SMALLEM_SERVER_ANALYSIS_TIME_COMPARATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/comparator.h"
#include "server/analysis/reference_curve.h"

namespace smallem {

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
  std::optional<double> delta_over_tau;  // |Δt| / τ
  bool extrapolated = false;
  double span_ratio = 1;       // Interpolated::span_ratio
  std::string pending_reason;  // set on pending rows

  // "better (2.5τ)", "worse (1.3τ)", "within noise", "pending: …".
  std::string VerdictText() const;
};

struct TimeReport {
  Report steps;                    // the equal-steps comparison of the same runs
  std::string device_class;        // the class compared (steps.device_class, or the curve's)
  std::vector<CurvePoint> curve;   // the complete reference budgets on that class, by budget
  int curve_budgets = 0;           // budgets the reference plan asks for
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

#endif  // SMALLEM_SERVER_ANALYSIS_TIME_COMPARATOR_H_
