#include "server/analysis/time_comparator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/grid/grid.h"

namespace smallem {
namespace {

// The finished runs of `variant` at the plan's budget on `device_class`, in
// the plan's seed order.
void GatherSeeds(const ComparisonPlan& plan, const std::vector<ComparedRun>& runs,
                 const std::string& device_class, TimeRow& row) {
  for (int64_t seed : plan.seeds) {
    for (const ComparedRun& r : runs) {
      if (r.variant != row.variant || r.seed != seed || r.budget != plan.budget ||
          r.state != RunState::kSucceeded || r.device_class != device_class) {
        continue;
      }
      row.seconds.push_back(r.train_seconds);
      row.losses.push_back(r.val_nats_per_byte);
      row.steps.push_back(r.steps.value_or(plan.budget.steps.value_or(0)));
      break;  // CompareAtEqualSteps has rejected duplicates already
    }
  }
}

std::string ExtrapolationNote(const TimeRow& row, const TimeCurve& curve) {
  const bool below = row.span_ratio < 1;
  return absl::StrFormat(
      "%s: its %.1f s are %.2f× the %s reference run's %.1f s, outside the curve: R(t) = %.4f "
      "is extrapolated along the %s segment, not measured.",
      row.variant, *row.mean_seconds, row.span_ratio, below ? "shortest" : "longest",
      below ? curve.first_seconds() : curve.last_seconds(), *row.reference_loss,
      below ? "first" : "last");
}

}  // namespace

std::string TimeRow::VerdictText() const {
  return smallem::VerdictText(verdict, delta_over_tau, pending_reason);
}

bool TimeReport::Complete() const {
  return std::none_of(rows.begin(), rows.end(),
                      [](const TimeRow& r) { return r.verdict == Verdict::kPending; });
}

absl::StatusOr<TimeReport> CompareAtEqualTime(const ComparisonPlan& plan,
                                              const std::vector<ComparedRun>& runs) {
  if (!plan.reference) {
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment ", plan.experiment,
        " has no reference curve, so it cannot be compared at "
        "equal time: add a `reference` block (optimizer and budgets, see docs/grid-format.md) to "
        "its grid and submit it again, or compare at equal steps (--at steps)"));
  }
  const ReferencePlan& reference = *plan.reference;
  absl::StatusOr<Report> steps = CompareAtEqualSteps(plan, runs);
  if (!steps.ok()) return steps.status();

  TimeReport report;
  report.steps = *std::move(steps);
  report.device_class = report.steps.device_class.empty() ? ReferenceDeviceClass(reference, runs)
                                                          : report.steps.device_class;
  absl::StatusOr<ReferenceRuns> gathered =
      GatherReferenceRuns(reference, runs, report.device_class);
  if (!gathered.ok()) return gathered.status();
  const ReferenceRuns& ref = *gathered;

  // Times on different device classes are never compared.
  if (ref.finished == 0 && ref.finished_elsewhere > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("equal-time comparison refused: the reference curve ran on device class ",
                     absl::StrJoin(ref.other_classes, ", "), " but the variants are compared on ",
                     report.device_class,
                     "; training times are comparable only within one device class. "
                     "Run the reference budgets on a ",
                     report.device_class, " worker, or compare at equal steps (--at steps)"));
  }

  report.curve = ref.points;
  report.curve_budgets = ref.budgets_expected;
  std::optional<TimeCurve> curve;
  if (ref.points.size() >= 2) {
    absl::StatusOr<TimeCurve> made = TimeCurve::Create(ref.points);
    if (!made.ok()) return made.status();
    curve = *std::move(made);
    if (!ref.pending.empty()) {
      report.notes.push_back(
          absl::StrCat("The reference curve is incomplete: ", ref.points.size(), " of ",
                       ref.budgets_expected, " budgets finished on ", report.device_class, " (",
                       absl::StrJoin(ref.pending, "; "), "); R(t) uses the finished ones."));
    }
  }

  const std::optional<double> tau = report.steps.tau;
  std::vector<std::string> extrapolation_notes;
  for (const ReportRow& steps_row : report.steps.rows) {
    TimeRow row;
    row.variant = steps_row.variant;
    GatherSeeds(plan, runs, report.steps.device_class, row);
    if (!steps_row.mean_loss) {
      row.pending_reason = steps_row.pending_reason;
    } else if (!tau) {
      row.pending_reason = "waiting for the baseline (τ)";
    } else if (!curve) {
      row.pending_reason =
          absl::StrCat("waiting for the reference curve (", ref.points.size(), " of ",
                       ref.budgets_expected, " budgets finished on ", report.device_class, ")");
    } else {
      row.mean_seconds = steps_row.mean_train_seconds;
      row.mean_loss = steps_row.mean_loss;
      if (!(*row.mean_seconds > 0)) {
        row.pending_reason = "its runs recorded no training time";
      } else {
        const Interpolated r = curve->Interpolate(*row.mean_seconds);
        row.reference_loss = r.value;
        row.extrapolated = r.extrapolated;
        row.span_ratio = r.span_ratio;
        row.delta = *row.mean_loss - r.value;
        const Judgement judgement = JudgeDelta(*row.delta, *tau);
        row.verdict = judgement.verdict;
        row.delta_over_tau = judgement.delta_over_tau;
        if (row.extrapolated) extrapolation_notes.push_back(ExtrapolationNote(row, *curve));
      }
    }
    report.rows.push_back(std::move(row));
  }
  for (std::string& note : extrapolation_notes) report.notes.push_back(std::move(note));
  if (ref.finished_elsewhere > 0) {
    report.notes.push_back(
        absl::StrCat(ref.finished_elsewhere, " finished reference run(s) on device class ",
                     absl::StrJoin(ref.other_classes, ", "), " left out: only runs on ",
                     report.device_class, " are compared in time."));
  }
  return report;
}

}  // namespace smallem
