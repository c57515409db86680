#include "server/analysis/reference_runs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "server/analysis/stats.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

// A reference run of `plan`, finished or not.
bool IsReferenceRun(const ReferencePlan& plan, const ComparedRun& r) {
  if (r.variant != kReferenceVariant &&
      (plan.shared_variant.empty() || r.variant != plan.shared_variant)) {
    return false;
  }
  return std::any_of(plan.budgets.begin(), plan.budgets.end(),
                     [&](const Budget& b) { return b == r.budget; }) &&
         std::find(plan.seeds.begin(), plan.seeds.end(), r.seed) != plan.seeds.end();
}

}  // namespace

std::string ReferenceDeviceClass(const ReferencePlan& plan, const std::vector<ComparedRun>& runs) {
  std::map<std::string, int> counts;  // ordered: ties go to the smallest name
  for (const ComparedRun& r : runs) {
    if (r.state == RunState::kSucceeded && IsReferenceRun(plan, r)) ++counts[r.device_class];
  }
  std::string best;
  int best_count = 0;
  for (const auto& [device_class, count] : counts) {
    if (count > best_count) best = device_class, best_count = count;
  }
  return best;
}

absl::StatusOr<ReferenceRuns> GatherReferenceRuns(const ReferencePlan& plan,
                                                  const std::vector<ComparedRun>& runs,
                                                  const std::string& device_class) {
  ReferenceRuns out;
  out.device_class = device_class;
  out.budgets_expected = static_cast<int>(plan.budgets.size());
  std::set<std::string> elsewhere;
  for (const ComparedRun& r : runs) {
    if (r.state == RunState::kSucceeded && IsReferenceRun(plan, r) &&
        r.device_class != device_class) {
      ++out.finished_elsewhere;
      elsewhere.insert(r.device_class);
    }
  }
  out.other_classes.assign(elsewhere.begin(), elsewhere.end());

  for (const Budget& budget : plan.budgets) {
    CurvePoint point;
    point.budget = budget;
    int failed = 0, cancelled = 0;
    for (int64_t seed : plan.seeds) {
      const ComparedRun* found = nullptr;
      for (const ComparedRun& r : runs) {
        if (!IsReferenceRun(plan, r) || r.seed != seed || r.budget != budget) continue;
        if (r.state == RunState::kFailed) ++failed;
        if (r.state == RunState::kCancelled) ++cancelled;
        if (r.state != RunState::kSucceeded || r.device_class != device_class) continue;
        if (found != nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "two finished reference runs at ", BudgetLabel(budget), " seed ", seed,
              " on device class \"", device_class, "\"; the store should hold one per cell"));
        }
        found = &r;
        ++out.finished;
      }
      if (found == nullptr) continue;
      point.seed_seconds.push_back(found->train_seconds);
      point.seed_losses.push_back(found->val_nats_per_byte);
      point.seed_steps.push_back(found->steps.value_or(budget.steps.value_or(0)));
    }
    if (point.seed_losses.size() == plan.seeds.size() && !plan.seeds.empty()) {
      point.seconds = Mean(point.seed_seconds);
      point.loss = Mean(point.seed_losses);
      out.points.push_back(std::move(point));
    } else {
      std::string reason = absl::StrCat(BudgetLabel(budget), ": ", point.seed_losses.size(), " of ",
                                        plan.seeds.size(), " seeds finished");
      if (failed > 0) absl::StrAppend(&reason, ", ", failed, " failed");
      if (cancelled > 0) absl::StrAppend(&reason, ", ", cancelled, " cancelled");
      out.pending.push_back(std::move(reason));
    }
  }
  return out;
}

}  // namespace smallem
