#include "server/analysis/equal_time.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/analysis/distributions.h"
#include "server/analysis/holm.h"
#include "server/analysis/stats.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

// The finished runs of `variant` at the plan's budget on `device_class`, in
// the plan's seed order.
void GatherSeeds(const ComparisonPlan& plan, const std::vector<ComparedRun>& runs,
                 const std::string& device_class, TimeRow& row) {
  for (int64_t seed : plan.SeedsOf(row.variant)) {
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

// The seed-to-seed spreads behind the equal-time comparison, pooled over
// distinct runs: the loss variance of the compared arms (passed to
// ChooseReferenceCurve, which adds the reference points not flagged
// in_arms_noise) and the relative training-time variance of the arms and
// every point.
struct DistinctSpread {
  std::optional<double> arms_sigma;
  int arms_df = 0;
  TimeSpread time;
};

// One group of identically specified runs, by seed.
using SeedGroup = std::map<int64_t, std::pair<double, double>>;  // seed → (loss, seconds)

// The compared arms' finished runs at the plan's budget on `device_class`
// and the curve's points, each run counted once: the reference's shared
// variant's arm and a point at the compared budget are runs of the same
// cells (Grid::Cells lists them once), so that point joins the arm (their
// union by seed) and is flagged in_arms_noise. Without this the baseline's
// seeds would enter σ_all and cv twice.
DistinctSpread PoolDistinct(const ComparisonPlan& plan, const std::vector<ComparedRun>& runs,
                            const std::string& device_class, std::vector<CurvePoint>& points) {
  std::vector<SeedGroup> arms;
  size_t shared = plan.variants.size();
  for (size_t v = 0; v < plan.variants.size(); ++v) {
    SeedGroup group;
    for (const ComparedRun& r : runs) {
      if (r.variant == plan.variants[v] && r.budget == plan.budget &&
          r.state == RunState::kSucceeded && r.device_class == device_class &&
          plan.HasSeed(plan.variants[v], r.seed)) {
        group.emplace(r.seed, std::pair(r.val_nats_per_byte, r.train_seconds));
      }
    }
    if (plan.reference && plan.variants[v] == plan.reference->shared_variant) shared = v;
    arms.push_back(std::move(group));
  }
  std::vector<SeedGroup> others;  // the points not merged into an arm
  for (CurvePoint& p : points) {
    SeedGroup group;
    for (size_t i = 0; i < p.seed_losses.size() && i < plan.reference->seeds.size(); ++i) {
      group.emplace(plan.reference->seeds[i], std::pair(p.seed_losses[i], p.seed_seconds[i]));
    }
    if (shared < arms.size() && p.budget == plan.budget) {
      p.in_arms_noise = true;
      arms[shared].merge(group);  // keeps the arm's entry for a seed in both
    } else {
      others.push_back(std::move(group));
    }
  }
  DistinctSpread out;
  double loss_sum = 0, cv_sum = 0;
  int cv_df = 0;
  auto add = [&](const SeedGroup& g, bool loss) {
    if (g.size() < 2) return;
    std::vector<double> losses, seconds;
    for (const auto& [seed, value] : g) losses.push_back(value.first), seconds.push_back(value.second);
    const double df = static_cast<double>(g.size() - 1), m = Mean(seconds);
    if (loss) loss_sum += SampleVariance(losses) * df, out.arms_df += static_cast<int>(df);
    if (m > 0) cv_sum += SampleVariance(seconds) / (m * m) * df, cv_df += static_cast<int>(df);
  };
  for (const SeedGroup& g : arms) add(g, true);
  for (const SeedGroup& g : others) add(g, false);
  if (out.arms_df > 0) out.arms_sigma = std::sqrt(loss_sum / out.arms_df);
  if (cv_df > 0) out.time = TimeSpread{.cv = std::sqrt(cv_sum / cv_df), .df = cv_df};
  return out;
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

// What a term of an SE² is estimated from: terms scaled by one estimate
// (σ, or the time spread cv) share its degrees of freedom.
enum class Source { kSigma, kTimeSpread, kKnown };

// One term of an SE² with its degrees of freedom (kKnown: none).
struct Term {
  double variance = 0;
  double df = 0;
  Source source = Source::kKnown;
};

// Sets the row's SE, df, interval and τ from its terms. ν is the smallest
// df among the estimated sources that contribute: conservative, since
// Welch–Satterthwaite's ν is never below it (and with few seeds it is
// anti-conservative; docs/equal-time.md § Calibration).
Evidence JudgeTerms(const std::vector<Term>& terms, double floor, double seeds, TimeRow& row) {
  double total = 0, nu = 0;
  for (const Term& t : terms) {
    total += t.variance;
    if (t.source != Source::kKnown && t.variance > 0 && t.df > 0) {
      nu = nu == 0 ? t.df : std::min(nu, t.df);
    }
  }
  const double denominator = nu;  // > 0 when some estimated term contributes
  row.tau = floor;
  if (total > 0 && denominator > 0) {
    row.se = std::sqrt(total);
    row.df = nu;
    row.t_quantile = StudentTQuantile(0.975, *row.df);
    row.ci_low = *row.delta - *row.t_quantile * *row.se;
    row.ci_high = *row.delta + *row.t_quantile * *row.se;
    row.tau = std::max(floor, *row.t_quantile * *row.se);
  }
  // More seeds shrink every term but the model error, a bias bound.
  double fixed = 0;
  for (const Term& t : terms) fixed += t.source == Source::kKnown ? t.variance : 0;
  return {.delta = *row.delta, .se = row.se, .df = row.df, .floor = floor, .seeds_now = seeds,
          .fixed_variance = fixed};
}

void SetJudgement(const Judgement& judgement, TimeRow& row) {
  row.verdict = judgement.verdict;
  row.tau = judgement.tau;
  row.alpha = judgement.alpha;
  row.delta_over_tau = judgement.delta_over_tau;
  row.tost_low = judgement.tost_low;
  row.tost_high = judgement.tost_high;
  row.missable_effect = judgement.missable;
  row.seeds_to_decide = judgement.seeds_to_decide;
  row.decide_beyond_max = judgement.decide_beyond_max;
  row.pending_reason = judgement.reason;
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
  if (ref.points.size() >= 2) {
    std::vector<CurvePoint> points = ref.points;
    const DistinctSpread spread = PoolDistinct(plan, runs, report.steps.device_class, points);
    absl::StatusOr<CurveChoice> choice =
        ChooseReferenceCurve(points, spread.arms_sigma, spread.arms_df);
    if (!choice.ok()) return choice.status();
    report.choice = *std::move(choice);
    report.time_spread = spread.time;
    report.curve = points;  // with the point that is an arm's runs flagged
    report.bootstrap = CurveBootstrap::Run(report.choice->curve, report.choice->sigma,
                                           report.time_spread.cv, report.time_spread.df);
    if (!ref.pending.empty()) {
      report.notes.push_back(
          absl::StrCat("The reference curve is incomplete: ", ref.points.size(), " of ",
                       ref.budgets_expected, " budgets finished on ", report.device_class, " (",
                       absl::StrJoin(ref.pending, "; "), "); R(t) uses the finished ones."));
    }
    for (const std::string& note : report.choice->notes) report.notes.push_back(note);
    if (report.bootstrap->resamples() == 0) {
      report.notes.push_back(
          "No arm and no reference budget has two seeds, so R(t)'s own noise is not measured "
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

  std::vector<std::string> extrapolation_notes;
  std::vector<std::pair<size_t, Evidence>> family;  // compared rows, judged together
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
        const CurveChoice& choice = *report.choice;
        std::vector<Term> terms;
        // The noise model pooled over every arm and budget (an arm whose s
        // departs from it is named by the noise section's F test).
        if (choice.sigma) {
          terms.push_back({*choice.sigma * *choice.sigma / n, static_cast<double>(choice.sigma_df),
                           Source::kSigma});
        }
        row.se_variant = terms.empty() ? std::nullopt : std::optional(std::sqrt(terms[0].variance));
        // SE_R(t): its loss part scales the pooled σ (σ's df), its time
        // part rests on the reference budgets' few seeds.
        row.se_reference = report.bootstrap->Se(*row.mean_seconds);
        terms.push_back({std::pow(report.bootstrap->SeLoss(*row.mean_seconds), 2),
                         static_cast<double>(choice.sigma_df), Source::kSigma});
        terms.push_back({std::pow(report.bootstrap->SeTime(*row.mean_seconds), 2),
                         static_cast<double>(report.bootstrap->time_df()), Source::kTimeSpread});
        row.se_seconds = *row.mean_seconds * report.time_spread.cv / std::sqrt(n);
        const double slope_term = r.slope * *row.se_seconds;
        terms.push_back({slope_term * slope_term, static_cast<double>(report.time_spread.df),
                         Source::kTimeSpread});
        const ModelError model_error = ModelErrorAt(choice, *row.mean_seconds);
        row.se_model = std::sqrt(model_error.variance);
        // A bias bound measured at twice the spacing R(t) uses: taken as
        // known (no degrees of freedom), not as a noise estimate.
        terms.push_back({model_error.variance, 0, Source::kKnown});
        Evidence e = JudgeTerms(terms, plan.noise_floor, n, row);
        e.alpha = plan.alpha;
        e.equivalence_alpha = plan.equivalence_alpha;
        family.push_back({report.rows.size(), e});
        if (row.extrapolated) extrapolation_notes.push_back(ExtrapolationNote(row, curve));
      }
    }
    report.rows.push_back(std::move(row));
  }
  std::vector<Evidence> evidence;
  for (const auto& [index, e] : family) evidence.push_back(e);
  const std::vector<Judgement> judgements = JudgeFamily(evidence, plan.holm);
  for (size_t i = 0; i < family.size(); ++i) {
    SetJudgement(judgements[i], report.rows[family[i].first]);
  }
  if (plan.holm && family.size() >= 2) {
    report.notes.push_back(absl::StrFormat(
        "At equal time Holm's correction runs across the %d rows met with the curve (the "
        "baseline's included).",
        static_cast<int>(family.size())));
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
