#include "server/analysis/comparator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "server/analysis/stats.h"
#include "server/grid/grid.h"

namespace smallem {
namespace {

std::optional<double> WelchT(const std::vector<double>& v, const std::vector<double>& b) {
  if (v.size() < 3 || b.size() < 3) return std::nullopt;
  const std::optional<WelchResult> welch = Welch(v, b);
  if (!welch) return std::nullopt;
  return welch->t;
}

// What the runs of one variant amount to on the compared device class.
struct Arm {
  std::vector<double> losses;   // finished on the class, in plan seed order
  std::vector<double> seconds;
  std::optional<int64_t> params;
  int failed = 0;
  int elsewhere = 0;            // finished on another class
};

absl::Status CheckPlan(const ComparisonPlan& plan) {
  if (std::find(plan.variants.begin(), plan.variants.end(), plan.baseline) ==
      plan.variants.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "baseline \"", plan.baseline, "\" is not among the variants compared (",
        absl::StrJoin(plan.variants, ", "), ")"));
  }
  if (plan.seeds.empty()) return absl::InvalidArgumentError("no seeds to compare");
  if (!(plan.noise_floor > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise floor must be positive (got ", plan.noise_floor, ")"));
  }
  if (!plan.budget.steps && !plan.budget.minutes) {
    return absl::InvalidArgumentError("the comparison names no budget");
  }
  return absl::OkStatus();
}

// The plan's class, or the one most of the baseline's finished runs used.
std::string ChooseDeviceClass(const ComparisonPlan& plan,
                              const std::vector<const ComparedRun*>& relevant) {
  if (!plan.device_class.empty()) return plan.device_class;
  // Before the baseline has any result, the class most runs used, so that
  // early results are not all reported as left out.
  for (bool baseline_only : {true, false}) {
    std::map<std::string, int> counts;  // ordered: ties go to the smallest name
    for (const ComparedRun* r : relevant) {
      if (r->state == RunState::kSucceeded && (!baseline_only || r->variant == plan.baseline)) {
        ++counts[r->device_class];
      }
    }
    std::string best;
    int best_count = 0;
    for (const auto& [device_class, count] : counts) {
      if (count > best_count) best = device_class, best_count = count;
    }
    if (best_count > 0) return best;
  }
  return "";
}

std::string PendingReason(const Arm& arm, size_t expected) {
  std::string reason = absl::StrCat(arm.losses.size(), " of ", expected, " seeds finished");
  if (arm.failed > 0) absl::StrAppend(&reason, ", ", arm.failed, " failed");
  if (arm.elsewhere > 0) {
    absl::StrAppend(&reason, ", ", arm.elsewhere, " on another device class");
  }
  return reason;
}

}  // namespace

ComparisonPlan ComparisonPlan::ForGrid(const Grid& grid) {
  ComparisonPlan plan;
  plan.experiment = grid.name;
  plan.baseline = grid.baseline;
  for (const GridVariant& v : grid.variants) plan.variants.push_back(v.name);
  plan.seeds = grid.seeds;
  plan.budget = grid.budget;
  if (grid.reference) {
    ReferencePlan reference{.budgets = grid.reference->budgets, .seeds = grid.reference->seeds,
                            .shared_variant = ""};
    for (const GridVariant& v : grid.variants) {
      if (v.spec_hash == grid.reference->spec_hash) reference.shared_variant = v.name;
    }
    plan.reference = std::move(reference);
  }
  return plan;
}

std::string ReportRow::VerdictText() const {
  return smallem::VerdictText(verdict, delta_over_tau, pending_reason);
}

bool Report::Complete() const {
  return std::none_of(rows.begin(), rows.end(),
                      [](const ReportRow& r) { return r.verdict == Verdict::kPending; });
}

absl::StatusOr<Report> CompareAtEqualSteps(const ComparisonPlan& plan,
                                           const std::vector<ComparedRun>& runs) {
  if (absl::Status st = CheckPlan(plan); !st.ok()) return st;

  // Keep the runs this comparison is about.
  const std::set<std::string> variants(plan.variants.begin(), plan.variants.end());
  std::vector<const ComparedRun*> relevant;
  for (const ComparedRun& r : runs) {
    if (variants.contains(r.variant) && r.budget == plan.budget &&
        std::find(plan.seeds.begin(), plan.seeds.end(), r.seed) != plan.seeds.end()) {
      relevant.push_back(&r);
    }
  }

  Report report;
  report.experiment = plan.experiment;
  report.baseline = plan.baseline;
  report.budget = plan.budget;
  report.noise_floor = plan.noise_floor;
  report.device_class = ChooseDeviceClass(plan, relevant);

  // Gather each arm, seed by seed in plan order.
  std::map<std::string, Arm> arms;
  for (int64_t seed : plan.seeds) {
    std::map<std::string, const ComparedRun*> here;  // variant → finished run on the class
    for (const ComparedRun* r : relevant) {
      if (r->seed != seed) continue;
      Arm& arm = arms[r->variant];
      if (r->state == RunState::kFailed) ++arm.failed;
      if (r->state != RunState::kSucceeded) continue;
      if (r->device_class != report.device_class) {
        ++arm.elsewhere;
        report.left_out.push_back({r->variant, r->seed, r->device_class});
        continue;
      }
      if (auto [at, fresh] = here.emplace(r->variant, r); !fresh) {
        return absl::InvalidArgumentError(absl::StrCat(
            "two finished runs for variant \"", r->variant, "\" seed ", seed,
            " on device class \"", r->device_class, "\"; the store should hold one per cell"));
      }
      arm.losses.push_back(r->val_nats_per_byte);
      arm.seconds.push_back(r->train_seconds);
      if (!arm.params) arm.params = r->params;
    }
  }

  const size_t expected = plan.seeds.size();
  const Arm& base = arms[plan.baseline];
  const bool baseline_complete = base.losses.size() == expected;
  double base_mean = 0;
  if (baseline_complete) {
    base_mean = Mean(base.losses);
    const auto [lo, hi] = std::minmax_element(base.losses.begin(), base.losses.end());
    report.baseline_spread = *hi - *lo;
    report.tau = std::max(plan.noise_floor, *report.baseline_spread);
    if (expected == 1) {
      report.notes.push_back(
          "The baseline has one seed, so the noise was not measured: τ is the floor alone. "
          "Add seeds to measure it.");
    }
  }

  // The baseline's row first, then the others in plan order.
  std::vector<std::string> order = {plan.baseline};
  for (const std::string& v : plan.variants) {
    if (v != plan.baseline) order.push_back(v);
  }
  for (const std::string& name : order) {
    const Arm& arm = arms[name];
    ReportRow row;
    row.variant = name;
    row.seeds_expected = static_cast<int>(expected);
    row.seeds_finished = static_cast<int>(arm.losses.size());
    row.losses = arm.losses;
    row.params = arm.params;
    if (arm.params && base.params && *base.params > 0 && name != plan.baseline) {
      row.params_change = static_cast<double>(*arm.params - *base.params) /
                          static_cast<double>(*base.params);
      row.params_warning = std::abs(*row.params_change) > plan.params_warning_fraction;
    }
    const bool complete = arm.losses.size() == expected;
    if (complete) {
      row.mean_loss = Mean(arm.losses);
      row.mean_train_seconds = Mean(arm.seconds);
    }
    if (name == plan.baseline) {
      row.verdict = complete ? Verdict::kBaseline : Verdict::kPending;
      if (!complete) row.pending_reason = PendingReason(arm, expected);
    } else if (!complete) {
      row.pending_reason = PendingReason(arm, expected);
    } else if (!baseline_complete) {
      row.pending_reason = "waiting for the baseline";
    } else {
      row.delta = *row.mean_loss - base_mean;
      const Judgement judgement = JudgeDelta(*row.delta, *report.tau);
      row.verdict = judgement.verdict;
      row.delta_over_tau = judgement.delta_over_tau;
      row.welch_t = WelchT(arm.losses, base.losses);
    }
    if (row.params_warning) {
      report.notes.push_back(absl::StrFormat(
          "%s has %+.1f %% parameters against the baseline (%d vs %d): more than %.0f %% "
          "apart, so the comparison is not at equal size.",
          name, 100 * *row.params_change, *row.params, *base.params,
          100 * plan.params_warning_fraction));
    }
    report.rows.push_back(std::move(row));
  }

  if (!report.left_out.empty()) {
    std::set<std::string> classes;
    for (const LeftOutRun& r : report.left_out) classes.insert(r.device_class);
    report.notes.push_back(absl::StrCat(
        report.left_out.size(), " finished run(s) on device class ",
        absl::StrJoin(classes, ", "), " left out: only runs on ", report.device_class,
        " (the baseline's) are compared."));
  }
  return report;
}

}  // namespace smallem
