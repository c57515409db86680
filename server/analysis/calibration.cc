#include "server/analysis/calibration.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "server/analysis/equal_steps.h"
#include "server/analysis/reference_runs.h"
#include "server/analysis/sequential.h"
#include "server/analysis/stats.h"
#include "server/analysis/equal_time.h"

namespace smallem {
namespace {

double Normal(std::mt19937_64& rng) { return StandardNormal(rng); }

double BudgetSeconds(int i) { return 5 * std::pow(2.0, i); }

ComparedRun Run(const std::string& variant, int64_t seed, int64_t steps, double loss,
                double seconds) {
  ComparedRun r;
  r.variant = variant;
  r.seed = seed;
  r.budget = Budget{.steps = steps, .minutes = std::nullopt};
  r.state = RunState::kSucceeded;
  r.val_nats_per_byte = loss;
  r.train_seconds = seconds;
  r.device_class = "sim";
  return r;
}

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
        runs.push_back(Run("a", i, 1000, losses[i], 0));
      }
      for (int i : b) {
        plan.arm_seeds["b"].push_back(i);
        runs.push_back(Run("b", i, 1000, losses[i], 0));
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

const char* TrueCurveName(TrueCurve curve) {
  switch (curve) {
    case TrueCurve::kPowerLaw: return "power law";
    case TrueCurve::kPlateau: return "plateau";
    case TrueCurve::kLogLinear: return "log-linear";
  }
  return "?";
}

double TrueLoss(TrueCurve curve, double seconds) {
  switch (curve) {
    case TrueCurve::kPowerLaw: return 1.2 + 0.9 * std::pow(seconds / 10, -0.35);
    case TrueCurve::kPlateau: return 1.3 + 0.9 * std::pow((seconds + 15) / 25, -0.9);
    case TrueCurve::kLogLinear: return 2.0 - 0.15 * std::log(seconds / 5);
  }
  return 0;
}

SimulationResult Simulate(const SimulationConfig& config) {
  CHECK(config.budgets >= 2 && config.seeds >= 1 && config.experiments >= 0);
  std::mt19937_64 rng(config.seed);
  ComparisonPlan plan;
  plan.experiment = "simulated";
  plan.baseline = "base";
  plan.variants = {"base", "variant"};
  for (int s = 0; s < config.seeds; ++s) plan.seeds.push_back(s);
  plan.budget = Budget{.steps = 1'000'000, .minutes = std::nullopt};
  plan.noise_floor = config.floor;
  ReferencePlan reference;
  reference.seeds = plan.seeds;
  for (int i = 0; i < config.budgets; ++i) {
    reference.budgets.push_back(Budget{.steps = 100 << i, .minutes = std::nullopt});
  }
  plan.reference = reference;

  // The baseline at the middle budget; the variant there or between it and
  // the next.
  const int middle = (config.budgets - 1) / 2;
  const double base_seconds = BudgetSeconds(middle);
  double variant_seconds = base_seconds;
  if (config.equal_time && config.where == VariantTime::kBetween) {
    variant_seconds = std::sqrt(BudgetSeconds(middle) * BudgetSeconds(middle + 1));
  }

  SimulationResult out;
  std::vector<ComparedRun> runs;
  for (int e = 0; e < config.experiments; ++e) {
    runs.clear();
    auto arm = [&](const std::string& name, int64_t steps, double seconds, double delta) {
      for (int64_t s : plan.seeds) {
        // The loss is set by the steps done, the time only measured.
        const double t = seconds * (1 + config.time_cv * Normal(rng));
        runs.push_back(Run(name, s, steps, TrueLoss(config.curve, seconds) + delta +
                                               config.sigma * Normal(rng), t));
      }
    };
    arm("base", *plan.budget.steps, base_seconds, 0);
    arm("variant", *plan.budget.steps, variant_seconds, config.true_delta);
    if (config.equal_time) {
      for (int i = 0; i < config.budgets; ++i) {
        arm(kReferenceVariant, *reference.budgets[i].steps, BudgetSeconds(i), 0);
      }
    }
    Verdict verdict;
    if (config.equal_time) {
      absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
      CHECK(report.ok()) << report.status();
      verdict = report->rows[1].verdict;
    } else {
      absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
      CHECK(report.ok()) << report.status();
      verdict = report->rows[1].verdict;
    }
    ++out.experiments;
    out.better += verdict == Verdict::kBetter;
    out.worse += verdict == Verdict::kWorse;
  }
  return out;
}

double SequentialResult::RunsSe() const {
  if (experiments < 2) return 0;
  const double mean = RunsPerExperiment();
  const double variance =
      (static_cast<double>(runs_squared) - experiments * mean * mean) / (experiments - 1);
  return std::sqrt(std::max(0.0, variance) / experiments);
}

SequentialResult SimulateSequential(const SequentialConfig& config) {
  absl::StatusOr<std::vector<LookLevel>> levels =
      LookLevels({.looks = config.looks, .shape = config.shape});
  CHECK(levels.ok()) << levels.status();
  std::uniform_real_distribution<double> uniform(0, 1);
  const int max_seeds = config.looks.back();
  ComparisonPlan plan;
  plan.experiment = "simulated";
  plan.baseline = "base";
  plan.variants = {"base", "variant"};
  plan.budget = Budget{.steps = 1000, .minutes = std::nullopt};
  plan.noise_floor = config.floor;

  SequentialResult out;
  std::vector<ComparedRun> runs;
  for (int e = 0; e < config.experiments; ++e) {
    std::seed_seq experiment_seed{static_cast<uint32_t>(config.seed),
                                  static_cast<uint32_t>(config.seed >> 32),
                                  static_cast<uint32_t>(e)};
    std::mt19937_64 rng(experiment_seed);
    double delta = config.true_delta;
    if (config.mixture) {
      delta = 0;
      if (uniform(rng) < 0.5) {
        delta = config.sigma * (0.5 + 3.5 * uniform(rng)) * (uniform(rng) < 0.5 ? -1 : 1);
      }
    }
    // Every seed drawn up front; a look sees the first n_k of each arm.
    runs.clear();
    for (int s = 0; s < max_seeds; ++s) {
      runs.push_back(Run("base", s, 1000, config.sigma * Normal(rng), 1));
      runs.push_back(Run("variant", s, 1000, delta + config.sigma * Normal(rng), 1));
    }
    Verdict verdict = Verdict::kUndecided;
    int spent = 0;
    for (size_t k = 0; k < levels->size(); ++k) {
      const LookLevel& look = (*levels)[k];
      plan.seeds.clear();
      for (int s = 0; s < look.seeds; ++s) plan.seeds.push_back(s);
      plan.alpha = config.corrected ? look.alpha : kAlpha;
      plan.equivalence_alpha = config.corrected ? look.equivalence_alpha : kAlpha;
      absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
      CHECK(report.ok()) << report.status();
      verdict = report->rows[1].verdict;
      spent = look.seeds;
      if (verdict != Verdict::kUndecided) {
        out.stopped_early += k + 1 < levels->size();
        break;
      }
      const ReportRow& row = report->rows[1];
      if (row.delta && FutilityStop(config.futility, *levels, k, *row.delta, row.se,
                                    config.floor)) {
        ++out.futile;
        break;
      }
    }
    ++out.experiments;
    out.runs += 2 * spent;
    out.runs_squared += 4 * spent * spent;
    out.better += verdict == Verdict::kBetter;
    out.worse += verdict == Verdict::kWorse;
    out.equivalent += verdict == Verdict::kEquivalent;
    out.undecided += verdict == Verdict::kUndecided;
    if (delta != 0) {
      ++out.non_null;
      out.found += (delta < 0 && verdict == Verdict::kBetter) ||
                   (delta > 0 && verdict == Verdict::kWorse);
    } else {
      out.null_false += verdict == Verdict::kBetter || verdict == Verdict::kWorse;
    }
  }
  return out;
}

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
