#include "server/analysis/null_splits.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/check.h"
#include "server/analysis/equal_steps.h"

namespace smallem {
namespace {

// Every k-subset of `items`, in lexicographic order.
void Subsets(const std::vector<int>& items, int k, std::vector<std::vector<int>>& out) {
  std::vector<int> pick(k);
  for (int i = 0; i < k; ++i) pick[i] = i;
  const int n = static_cast<int>(items.size());
  while (true) {
    std::vector<int> chosen;
    for (int i : pick) chosen.push_back(items[i]);
    out.push_back(chosen);
    int i = k - 1;
    while (i >= 0 && pick[i] == n - k + i) --i;
    if (i < 0) return;
    ++pick[i];
    for (int j = i + 1; j < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

ComparedRun Succeeded(const std::string& variant, int64_t seed, double loss) {
  ComparedRun r;
  r.variant = variant;
  r.seed = seed;
  r.budget = Budget{.steps = 1000, .minutes = std::nullopt};
  r.state = RunState::kSucceeded;
  r.val_nats_per_byte = loss;
  r.device_class = "real";
  return r;
}

// The outcomes of every ordered split of the seeds `use` (indices into
// `losses`) into arms of k.
NullSplits Count(const std::vector<double>& losses, const std::vector<int>& use, int k,
                 double floor) {
  ComparisonPlan plan;
  plan.experiment = "null splits";
  plan.baseline = "a";
  plan.variants = {"a", "b"};
  plan.budget = Budget{.steps = 1000, .minutes = std::nullopt};
  plan.noise_floor = floor;
  NullSplits out;
  std::vector<std::vector<int>> firsts;
  Subsets(use, k, firsts);
  for (const std::vector<int>& a : firsts) {
    std::vector<int> rest;
    for (int i : use) {
      if (std::find(a.begin(), a.end(), i) == a.end()) rest.push_back(i);
    }
    std::vector<std::vector<int>> seconds;
    Subsets(rest, k, seconds);
    for (const std::vector<int>& b : seconds) {
      // Each arm's seeds are its runs' own (arm_seeds; `seeds` must not be
      // empty and holds the first arm's).
      plan.seeds.assign(a.begin(), a.end());
      plan.arm_seeds = {{"a", {}}, {"b", {}}};
      std::vector<ComparedRun> runs;
      for (int i : a) {
        plan.arm_seeds["a"].push_back(i);
        runs.push_back(Succeeded("a", i, losses[i]));
      }
      for (int i : b) {
        plan.arm_seeds["b"].push_back(i);
        runs.push_back(Succeeded("b", i, losses[i]));
      }
      absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
      CHECK(report.ok()) << report.status();
      const Verdict v = report->rows[1].verdict;
      ++out.splits;
      out.better += v == Verdict::kBetter;
      out.worse += v == Verdict::kWorse;
      out.equivalent += v == Verdict::kEquivalent;
      out.undecided += v == Verdict::kUndecided;
    }
  }
  out.false_rate = static_cast<double>(out.better + out.worse) / out.splits;
  return out;
}

}  // namespace

NullSplits CompareNullSplits(const std::vector<double>& losses, int arm_seeds, double floor) {
  const int n = static_cast<int>(losses.size());
  CHECK(arm_seeds >= 2 && n >= 2 * arm_seeds + 1) << n << " losses, arms of " << arm_seeds;
  for (double loss : losses) CHECK(std::isfinite(loss));
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  NullSplits out = Count(losses, all, arm_seeds, floor);
  // Jackknife: SE² = (n − 1)/n · Σ (rate₍ᵢ₎ − mean)².
  std::vector<double> left_out;
  for (int i = 0; i < n; ++i) {
    std::vector<int> rest;
    for (int j = 0; j < n; ++j) {
      if (j != i) rest.push_back(j);
    }
    left_out.push_back(Count(losses, rest, arm_seeds, floor).false_rate);
  }
  double mean = 0;
  for (double r : left_out) mean += r / n;
  double sum = 0;
  for (double r : left_out) sum += (r - mean) * (r - mean);
  out.false_rate_se = std::sqrt((n - 1.0) / n * sum);
  return out;
}

}  // namespace smallem
