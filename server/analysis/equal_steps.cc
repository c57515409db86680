#include "server/analysis/equal_steps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "server/analysis/holm.h"
#include "server/analysis/stats.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

// What the runs of one variant amount to on the compared device class.
struct Arm {
  std::vector<double> losses;   // finished on the class, in plan seed order
  std::vector<double> seconds;
  std::optional<int64_t> params;
  std::optional<int64_t> total_params;
  std::set<std::string> fingerprints;  // the non-empty eval_fingerprints of its results
  int running = 0;
  int failed = 0;
  int cancelled = 0;
  int elsewhere = 0;            // finished on another class
  std::vector<std::string> diverged;  // "seed 2 at step 40", in plan seed order
  std::optional<int64_t> kv_cache_bytes_per_token;
  std::vector<double> tokens_per_s, generation_tokens_per_s;  // those measured
};

std::optional<double> MeanOrNone(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double total = 0;
  for (double x : v) total += x;
  return total / static_cast<double>(v.size());
}

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

// Why `v` and `b` were not scored on one validation text; "" when they were
// or when either arm's results predate fingerprints.
std::string FingerprintConflict(const std::string& name, const Arm& v, const Arm& b) {
  if (v.fingerprints.size() > 1) {
    return absl::StrCat("its seeds were scored on different validation texts (eval_fingerprint ",
                        absl::StrJoin(v.fingerprints, ", "), ")");
  }
  if (b.fingerprints.size() > 1) {
    return absl::StrCat("the baseline's seeds were scored on different validation texts "
                        "(eval_fingerprint ", absl::StrJoin(b.fingerprints, ", "), ")");
  }
  if (v.fingerprints.empty() || b.fingerprints.empty() || v.fingerprints == b.fingerprints) {
    return "";
  }
  return absl::StrCat("scored on another validation text than the baseline (eval_fingerprint ",
                      *v.fingerprints.begin(), " vs ", *b.fingerprints.begin(), ")");
}

std::string PendingReason(const Arm& arm, size_t expected) {
  std::string reason = absl::StrCat(arm.losses.size(), " of ", expected, " seeds finished");
  if (arm.running > 0) absl::StrAppend(&reason, ", ", arm.running, " running");
  if (arm.failed > 0) absl::StrAppend(&reason, ", ", arm.failed, " failed");
  if (arm.cancelled > 0) absl::StrAppend(&reason, ", ", arm.cancelled, " cancelled");
  if (arm.elsewhere > 0) {
    absl::StrAppend(&reason, ", ", arm.elsewhere, " on another device class");
  }
  return reason;
}

// What a family of k better/worse verdicts risks (docs/equal-time.md § Many
// variants).
std::string FamilyNote(int k, bool holm) {
  if (holm) {
    return absl::StrFormat(
        "%d variants compared with Holm's correction (holm: true): the chance of any false "
        "better/worse verdict among them is at most %.0f %%; each row's τ uses its Holm level "
        "(JSON alpha).",
        k, 100 * kAlpha);
  }
  return absl::StrFormat(
      "%d variants compared at α = %.2f each: if none differs, %.2f false better/worse "
      "verdicts are expected among them (holm: true in the grid keeps the chance of any at "
      "%.0f %%).",
      k, kAlpha, k * kAlpha, 100 * kAlpha);
}

// The rule's outcome on a compared row.
void SetJudgement(const Judgement& judgement, ReportRow& row) {
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

ComparisonPlan ComparisonPlan::ForGrid(const Grid& grid) {
  ComparisonPlan plan;
  plan.experiment = grid.name;
  plan.baseline = grid.baseline;
  for (const GridVariant& v : grid.variants) plan.variants.push_back(v.name);
  plan.seeds = grid.seeds;
  plan.budget = grid.budget;
  plan.holm = grid.holm;
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

const std::vector<int64_t>& ComparisonPlan::SeedsOf(const std::string& variant) const {
  auto it = arm_seeds.find(variant);
  return it == arm_seeds.end() ? seeds : it->second;
}

std::vector<int64_t> ComparisonPlan::AllSeeds() const {
  std::vector<int64_t> all = seeds;
  for (const auto& [variant, list] : arm_seeds) {
    for (int64_t seed : list) {
      if (std::find(all.begin(), all.end(), seed) == all.end()) all.push_back(seed);
    }
  }
  return all;
}

bool ComparisonPlan::HasSeed(const std::string& variant, int64_t seed) const {
  const std::vector<int64_t>& mine = SeedsOf(variant);
  return std::find(mine.begin(), mine.end(), seed) != mine.end();
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
    if (variants.contains(r.variant) && r.budget == plan.budget && plan.HasSeed(r.variant, r.seed)) {
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
  for (int64_t seed : plan.AllSeeds()) {
    std::map<std::string, const ComparedRun*> here;  // variant → finished run on the class
    for (const ComparedRun* r : relevant) {
      if (r->seed != seed) continue;
      Arm& arm = arms[r->variant];
      if (r->state == RunState::kRunning) ++arm.running;
      if (r->state == RunState::kFailed) ++arm.failed;
      if (r->state == RunState::kCancelled) ++arm.cancelled;
      if (r->state == RunState::kDiverged) {
        arm.diverged.push_back(absl::StrCat("seed ", r->seed, " at step ", r->diverged_step));
      }
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
      if (!arm.kv_cache_bytes_per_token) {
        arm.kv_cache_bytes_per_token = r->kv_cache_bytes_per_token;
      }
      if (r->tokens_per_s) arm.tokens_per_s.push_back(*r->tokens_per_s);
      if (r->generation_tokens_per_s) {
        arm.generation_tokens_per_s.push_back(*r->generation_tokens_per_s);
      }
      if (!arm.total_params && r->total_params > 0 && r->total_params != r->params) {
        arm.total_params = r->total_params;
      }
      if (!r->eval_fingerprint.empty()) arm.fingerprints.insert(r->eval_fingerprint);
    }
  }

  const Arm& base = arms[plan.baseline];
  const bool baseline_complete = base.losses.size() == plan.SeedsOf(plan.baseline).size();
  const bool baseline_diverged = !base.diverged.empty();

  // The baseline's row first, then the others in plan order.
  std::vector<std::string> order = {plan.baseline};
  for (const std::string& v : plan.variants) {
    if (v != plan.baseline) order.push_back(v);
  }
  std::vector<std::vector<double>> all_losses;
  for (const std::string& name : order) all_losses.push_back(arms[name].losses);
  report.noise = PoolNoise(order, all_losses);
  if (baseline_complete && !report.noise.sigma) {
    report.notes.push_back(
        "No arm has two seeds, so the noise was not measured and no row is decided: two seeds "
        "per arm measure it (e.g. seeds: [1, 2]), three or more give each row its own "
        "interval.");
  }
  for (const ArmNoise& arm : report.noise.arms) {
    if (!arm.departs) continue;
    report.notes.push_back(absl::StrFormat(
        "%s: its seed-to-seed s = %.4f departs from the other arms' pooled noise (F = %.2f at "
        "(%d, %d) df, p = %.4f < %.2f): its seeds vary %s than the others'.",
        arm.name, *arm.stddev, *arm.f_ratio, arm.seeds - 1, *arm.f_df_rest, *arm.f_p,
        kVarianceTestLevel, *arm.f_ratio > 1 ? "more" : "less"));
  }

  // The compared rows (index into report.rows) and their evidence, judged
  // together once every row is known (Holm ranks them).
  std::vector<std::pair<size_t, Evidence>> family;
  for (const std::string& name : order) {
    const Arm& arm = arms[name];
    const size_t expected = plan.SeedsOf(name).size();
    const std::string conflict = name == plan.baseline ? "" : FingerprintConflict(name, arm, base);
    ReportRow row;
    row.variant = name;
    row.seeds_expected = static_cast<int>(expected);
    row.seeds_finished = static_cast<int>(arm.losses.size());
    row.losses = arm.losses;
    row.params = arm.params;
    row.kv_cache_bytes_per_token = arm.kv_cache_bytes_per_token;
    row.mean_tokens_per_s = MeanOrNone(arm.tokens_per_s);
    row.mean_generation_tokens_per_s = MeanOrNone(arm.generation_tokens_per_s);
    row.total_params = arm.total_params;
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
    if (!arm.diverged.empty()) {
      // An outcome, not a missing seed: never averaged, never pending.
      row.verdict = Verdict::kDiverged;
      row.pending_reason = absl::StrCat(arm.diverged.size(), " of ", expected,
                                        " seeds diverged (", absl::StrJoin(arm.diverged, ", "),
                                        ")");
      row.mean_loss.reset();
      row.mean_train_seconds.reset();
    } else if (name == plan.baseline) {
      row.verdict = complete ? Verdict::kBaseline : Verdict::kPending;
      if (!complete) row.pending_reason = PendingReason(arm, expected);
    } else if (!complete) {
      row.pending_reason = PendingReason(arm, expected);
    } else if (baseline_diverged) {
      row.verdict = Verdict::kRefused;
      row.pending_reason = "the baseline diverged";
    } else if (!baseline_complete) {
      row.pending_reason = "waiting for the baseline";
    } else if (!conflict.empty()) {
      row.verdict = Verdict::kRefused;
      row.pending_reason = conflict;
      report.notes.push_back(absl::StrCat(
          name, " is not compared: ", conflict,
          ". Its loss is on other targets; rerun the older arm with the current engine."));
    } else {
      const Difference d = CompareMeans(arm.losses, base.losses, report.noise, plan.noise_floor);
      row.delta = d.delta;
      row.se_method = d.method;
      row.se = d.se;
      row.df = d.df;
      row.t_quantile = d.t;
      row.ci_low = d.ci_low;
      row.ci_high = d.ci_high;
      row.tau = d.tau;
      family.push_back({report.rows.size(),
                        {.delta = d.delta, .se = d.se, .df = d.df, .floor = plan.noise_floor,
                         .seeds_now = 2.0 / (1.0 / arm.losses.size() + 1.0 / base.losses.size()),
                         .fixed_variance = 0,
                         .alpha = plan.alpha,
                         .equivalence_alpha = plan.equivalence_alpha}});
      if (arm.losses.size() >= 3 && base.losses.size() >= 3) {
        if (const std::optional<WelchResult> welch = Welch(arm.losses, base.losses)) {
          row.welch_t = welch->t;
          row.welch_df = welch->df;
        }
      }
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

  std::vector<Evidence> evidence;
  for (const auto& [index, e] : family) evidence.push_back(e);
  const std::vector<Judgement> judgements = JudgeFamily(evidence, plan.holm);
  for (size_t i = 0; i < family.size(); ++i) {
    SetJudgement(judgements[i], report.rows[family[i].first]);
  }
  report.family_size = static_cast<int>(family.size());
  report.holm = plan.holm;
  if (report.family_size >= 2) report.notes.push_back(FamilyNote(report.family_size, plan.holm));

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
