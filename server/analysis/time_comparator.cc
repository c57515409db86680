#include "server/analysis/time_comparator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"
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
      "is extrapolated (%s), not measured.",
      row.variant, *row.mean_seconds, row.span_ratio, below ? "shortest" : "longest",
      below ? curve.first_seconds() : curve.last_seconds(), *row.reference_loss,
      CurveModelName(curve.model()));
}

// One term of an SE² with its degrees of freedom (0 = known exactly).
struct Term {
  double variance = 0;
  double df = 0;
};

// Sets the row's SE, df, interval and τ from its terms (Welch–Satterthwaite).
void Judge(const std::vector<Term>& terms, double floor, TimeRow& row) {
  double total = 0, denominator = 0;
  for (const Term& t : terms) {
    total += t.variance;
    if (t.variance > 0 && t.df > 0) denominator += t.variance * t.variance / t.df;
  }
  row.tau = floor;
  if (total > 0 && denominator > 0) {
    row.se = std::sqrt(total);
    row.df = total * total / denominator;
    row.t_quantile = StudentTQuantile(0.975, *row.df);
    row.ci_low = *row.delta - *row.t_quantile * *row.se;
    row.ci_high = *row.delta + *row.t_quantile * *row.se;
    row.tau = std::max(floor, *row.t_quantile * *row.se);
  }
  const Judgement judgement = JudgeDelta(*row.delta, *row.tau);
  row.verdict = judgement.verdict;
  row.delta_over_tau = judgement.delta_over_tau;
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
  const NoiseModel& noise = report.steps.noise;
  if (ref.points.size() >= 2) {
    absl::StatusOr<CurveChoice> choice = ChooseReferenceCurve(ref.points, noise.sigma, noise.df);
    if (!choice.ok()) return choice.status();
    report.choice = *std::move(choice);
    report.bootstrap = CurveBootstrap::Run(report.choice->curve);
    if (!ref.pending.empty()) {
      report.notes.push_back(
          absl::StrCat("The reference curve is incomplete: ", ref.points.size(), " of ",
                       ref.budgets_expected, " budgets finished on ", report.device_class, " (",
                       absl::StrJoin(ref.pending, "; "), "); R(t) uses the finished ones."));
    }
    for (const std::string& note : report.choice->notes) report.notes.push_back(note);
    if (report.bootstrap->resamples() == 0) {
      report.notes.push_back(
          "The reference budgets have one seed each, so R(t)'s own noise is not measured "
          "(SE_R = 0, no band in the figure): τ time understates the uncertainty. Give the "
          "reference two or more seeds.");
    }
    // Each left-out miss against the τ of a variant measured there.
    std::vector<std::string> over;
    for (LeftOut& m : report.choice->left_out) {
      size_t n = 1;
      for (const CurvePoint& p : ref.points) {
        if (p.budget == m.budget) n = std::max<size_t>(1, p.seed_losses.size());
      }
      const double se_r = report.bootstrap->Se(m.seconds);
      const std::optional<double> sigma = report.choice->sigma;
      m.tau = plan.noise_floor;
      if (sigma) {
        const double se = std::sqrt(*sigma * *sigma / static_cast<double>(n) + se_r * se_r);
        m.tau = std::max(plan.noise_floor,
                         StudentTQuantile(0.975, report.choice->sigma_df) * se);
      }
      m.exceeds = std::abs(m.miss) > *m.tau;
      if (m.exceeds) {
        over.push_back(absl::StrFormat("%s misses by %+.4f, %s", BudgetLabel(m.budget), m.miss,
                                       FormatTauMultiple(std::abs(m.miss) / *m.tau)));
      }
    }
    if (!over.empty()) {
      report.notes.push_back(absl::StrCat(
          "Leave-one-out: the curve predicts some budgets it did not see worse than τ (",
          absl::StrJoin(over, "; "),
          "): between those budgets R(t) is uncertain beyond its bootstrap band. Add budgets "
          "closer together there (docs/equal-time.md § How many budgets)."));
    }
  }

  double reference_seed_df = 0;
  for (const CurvePoint& p : ref.points) {
    const double df = static_cast<double>(p.seed_losses.size()) - 1;
    reference_seed_df = reference_seed_df == 0 ? df : std::min(reference_seed_df, df);
  }
  std::vector<std::string> extrapolation_notes;
  for (const ReportRow& steps_row : report.steps.rows) {
    TimeRow row;
    row.variant = steps_row.variant;
    GatherSeeds(plan, runs, report.steps.device_class, row);
    if (steps_row.verdict == Verdict::kRefused || steps_row.verdict == Verdict::kDiverged) {
      row.verdict = steps_row.verdict;
      row.pending_reason = steps_row.pending_reason;
    } else if (!steps_row.mean_loss) {
      row.pending_reason = steps_row.pending_reason;
    } else if (report.steps.rows.front().verdict == Verdict::kPending) {
      row.pending_reason = "waiting for the baseline";
    } else if (!report.choice) {
      row.pending_reason =
          absl::StrCat("waiting for the reference curve (", ref.points.size(), " of ",
                       ref.budgets_expected, " budgets finished on ", report.device_class, ")");
    } else {
      row.mean_seconds = steps_row.mean_train_seconds;
      row.mean_loss = steps_row.mean_loss;
      if (!(*row.mean_seconds > 0)) {
        row.pending_reason = "its runs recorded no training time";
      } else {
        const TimeCurve& curve = report.choice->curve;
        const Interpolated r = curve.Interpolate(*row.mean_seconds);
        row.reference_loss = r.value;
        row.slope = r.slope;
        row.extrapolated = r.extrapolated;
        row.span_ratio = r.span_ratio;
        row.delta = *row.mean_loss - r.value;
        const double n = static_cast<double>(row.losses.size());
        std::vector<Term> terms;
        if (row.losses.size() >= 3) {
          terms.push_back({SampleVariance(row.losses) / n, n - 1});
        } else if (noise.sigma) {
          terms.push_back({*noise.sigma * *noise.sigma / n, static_cast<double>(noise.df)});
        }
        row.se_variant = terms.empty() ? std::nullopt : std::optional(std::sqrt(terms[0].variance));
        row.se_reference = report.bootstrap->Se(*row.mean_seconds);
        // SE_R(t) rests mostly on the few seeds of the budgets nearest t:
        // its degrees of freedom are those of one budget, not the pool's.
        terms.push_back({*row.se_reference * *row.se_reference, reference_seed_df});
        row.se_seconds = row.seconds.size() >= 2 ? std::sqrt(SampleVariance(row.seconds) / n) : 0.0;
        const double slope_term = r.slope * *row.se_seconds;
        terms.push_back({slope_term * slope_term, n - 1});
        Judge(terms, plan.noise_floor, row);
        if (row.extrapolated) extrapolation_notes.push_back(ExtrapolationNote(row, curve));
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
