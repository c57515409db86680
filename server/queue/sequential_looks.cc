#include "server/queue/sequential_looks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/analysis/equal_steps.h"
#include "server/analysis/sequential.h"
#include "runspec/grid.h"
#include "server/report/experiment_report.h"

namespace smallem {
namespace {

constexpr char kContinue[] = "continue";

// The outcome a look records for a row that is not pending.
std::string OutcomeOf(Verdict verdict, bool last_look) {
  switch (verdict) {
    case Verdict::kBetter: return "better";
    case Verdict::kWorse: return "worse";
    case Verdict::kEquivalent: return "equivalent";
    case Verdict::kDiverged: return "diverged";
    case Verdict::kRefused: return "not compared";
    default: return last_look ? "undecided" : kContinue;
  }
}

CellRecord VariantCell(const GridVariant& v, int64_t seed, const Budget& budget) {
  return CellRecord{.variant = v.name, .variant_kind = "variant", .spec_json = v.spec_json,
                    .spec_hash = v.spec_hash, .seed = seed, .budget = BudgetKey(budget),
                    .budget_steps = budget.steps, .budget_minutes = budget.minutes};
}

bool AnyCancelled(const std::vector<RunRecord>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [](const RunRecord& r) { return r.status == RunStatus::kCancelled; });
}

}  // namespace

absl::StatusOr<LookPlan> PlanLooks(const LookInputs& in, int64_t now_ms) {
  LookPlan plan;
  if (in.experiment.seed_schedule.empty()) return plan;
  // `smallemctl cancel` stops the looks too; `retry` requeues the runs and
  // the looks go on from where they were.
  if (AnyCancelled(in.runs)) return plan;
  ASSIGN_OR_RETURN(const SeedSchedule schedule,
                   SeedSchedule::FromJson(in.experiment.seed_schedule));
  ASSIGN_OR_RETURN(const Grid grid, ParseGrid(in.experiment.grid_yaml, in.experiment.grid_file));
  ASSIGN_OR_RETURN(const std::vector<LookLevel> levels,
                   LookLevels({.looks = schedule.looks, .shape = BoundaryShape::kOBrienFleming}));
  const GridVariant* baseline = grid.FindVariant(grid.baseline);
  if (baseline == nullptr) return plan;
  if (!in.runs.empty()) plan.retry_budget = in.runs.front().retry_budget;

  std::map<int64_t, const ResultRecord*> results;
  for (const ResultRecord& r : in.results) results[r.run_id] = &r;
  std::vector<ComparedRun> compared;
  std::set<std::pair<std::string, int64_t>> cells;  // (variant, seed) at the grid's budget
  const std::string budget = BudgetKey(grid.budget);
  for (const RunRecord& run : in.runs) {
    std::optional<ResultRecord> result;
    if (auto it = results.find(run.id); it != results.end()) result = *it->second;
    ASSIGN_OR_RETURN(ComparedRun c, ToComparedRun(run, result));
    compared.push_back(std::move(c));
    if (run.variant_kind == "variant" && run.budget == budget) cells.insert({run.variant, run.seed});
  }
  std::map<std::string, std::vector<const LookDecisionRecord*>> decided;
  for (const LookDecisionRecord& d : in.decisions) decided[d.variant].push_back(&d);

  for (const GridVariant& v : grid.variants) {
    if (v.name == grid.baseline) continue;
    const std::vector<const LookDecisionRecord*>& mine = decided[v.name];
    if (!mine.empty() && mine.back()->outcome != kContinue) continue;  // stopped
    const size_t k = mine.size();
    if (k >= levels.size()) continue;  // a schedule resubmitted with fewer looks
    const LookLevel& level = levels[k];
    // The two arms alone, as the calibration simulates them: a look's
    // verdict does not wait for, or depend on, the other variants.
    ComparisonPlan look = ComparisonPlan::ForGrid(grid);
    look.variants = {grid.baseline, v.name};
    look.seeds = schedule.SeedsUpTo(level.seeds);
    look.reference.reset();
    look.holm = false;
    look.alpha = level.alpha;
    look.equivalence_alpha = level.equivalence_alpha;
    ASSIGN_OR_RETURN(const Report report, CompareAtEqualSteps(look, compared));
    const ReportRow& row = report.rows[1];
    if (row.verdict == Verdict::kPending) continue;  // the look's runs are not all in
    const bool last = k + 1 == levels.size();
    LookDecisionRecord d{.experiment_id = in.experiment.id, .variant = v.name,
                         .look = static_cast<int>(k + 1), .seeds = level.seeds,
                         .outcome = OutcomeOf(row.verdict, last), .delta = row.delta,
                         .ci_low = row.ci_low, .ci_high = row.ci_high, .tau = row.tau,
                         .alpha = level.alpha, .equivalence_alpha = level.equivalence_alpha,
                         .seeds_to_decide = row.seeds_to_decide, .reason = row.VerdictText(),
                         .decided_unix_ms = now_ms};
    // Futility (kFutility, non-binding): an arm that would likely stay
    // undecided at the last look stops undecided now, its seeds not queued.
    if (d.outcome == kContinue && row.delta) {
      if (std::optional<double> power =
              FutilityStop(kFutility, levels, k, *row.delta, row.se, look.noise_floor)) {
        d.outcome = "undecided";
        d.reason = absl::StrFormat(
            "futility: a %.2g %% chance of a verdict at the last look (%d seeds per arm) if Δ "
            "stays as measured, below %.0f %%; %s",
            100 * *power, levels.back().seeds, 100 * kFutility.below, row.VerdictText());
      }
    }
    if (d.outcome == kContinue) {
      for (int64_t seed : schedule.SeedsUpTo(levels[k + 1].seeds)) {
        for (const GridVariant* arm : {&v, baseline}) {
          if (cells.insert({arm->name, seed}).second) {
            plan.cells.push_back(VariantCell(*arm, seed, grid.budget));
          }
        }
      }
    }
    plan.decisions.push_back(std::move(d));
  }
  return plan;
}

absl::StatusOr<std::optional<LooksSummary>> SummarizeLooks(
    const ExperimentRecord& experiment, const std::vector<RunRecord>& runs,
    const std::vector<LookDecisionRecord>& decisions) {
  if (experiment.seed_schedule.empty()) return std::optional<LooksSummary>();
  ASSIGN_OR_RETURN(const SeedSchedule schedule, SeedSchedule::FromJson(experiment.seed_schedule));
  ASSIGN_OR_RETURN(const Grid grid, ParseGrid(experiment.grid_yaml, experiment.grid_file));
  LooksSummary out;
  out.looks = schedule.looks;
  out.max = schedule.max;
  out.paused = AnyCancelled(runs);
  out.decisions = decisions;
  const std::string budget = BudgetKey(grid.budget);
  std::map<std::string, int> seeds;
  for (const RunRecord& r : runs) {
    if (r.variant_kind == "variant" && r.budget == budget) ++seeds[r.variant];
  }
  std::map<std::string, std::vector<const LookDecisionRecord*>> decided;
  for (const LookDecisionRecord& d : decisions) decided[d.variant].push_back(&d);
  const int total = static_cast<int>(schedule.looks.size());

  std::vector<const GridVariant*> order = {grid.FindVariant(grid.baseline)};
  for (const GridVariant& v : grid.variants) {
    if (v.name != grid.baseline) order.push_back(&v);
  }
  for (const GridVariant* v : order) {
    if (v == nullptr) continue;
    ArmLooks arm{.variant = v->name, .baseline = v->name == grid.baseline, .looks_done = 0,
                 .looks_total = total, .seeds = seeds[v->name], .stopped = false, .why = ""};
    if (arm.baseline) {
      arm.why = "the baseline: it gets the next look's seeds while a comparison with it is open";
      out.arms.push_back(std::move(arm));
      continue;
    }
    const std::vector<const LookDecisionRecord*>& mine = decided[v->name];
    arm.looks_done = static_cast<int>(mine.size());
    const LookDecisionRecord* d = mine.empty() ? nullptr : mine.back();
    const auto numbers = [](const LookDecisionRecord& d) {
      if (!d.delta || !d.tau) return std::string();
      return absl::StrFormat("; Δ = %+.4f nats/byte, τ = %.4f at α = %.2g", *d.delta, *d.tau,
                             d.alpha);
    };
    if (d != nullptr && d->outcome != kContinue) {
      arm.stopped = true;
      if (d->outcome == "undecided" && d->look < total) {
        arm.why = absl::StrCat("stopped at look ", d->look, " of ", total, " (", d->seeds,
                               " seeds per arm): undecided", numbers(*d), "; ", d->reason);
      } else if (d->outcome == "undecided") {
        arm.why = absl::StrCat(
            "stopped at the last look (", d->seeds, " seeds per arm): undecided",
            numbers(*d), "; ",
            d->seeds_to_decide
                ? absl::StrCat("about ", *d->seeds_to_decide, " seeds per arm would decide it")
                : std::string("more than 1000 seeds per arm would be needed to decide it"));
      } else if (d->outcome == "diverged" || d->outcome == "not compared") {
        arm.why = absl::StrCat("stopped at look ", d->look, ": ", d->reason);
      } else {
        arm.why = absl::StrCat("stopped at look ", d->look, " of ", total, ": ", d->outcome, " (",
                               d->seeds, " seeds per arm", numbers(*d), ")");
      }
    } else if (out.paused) {
      arm.why = absl::StrCat("paused: the experiment has cancelled runs (`smallemctl retry ",
                             experiment.name, "` resumes its looks)");
    } else {
      const int next = arm.looks_done;  // 0-based index of the look it waits for
      arm.why = absl::StrCat(
          "open: ", d != nullptr ? absl::StrCat("undecided at look ", d->look, numbers(*d), "; ")
                                 : "",
          "look ", next + 1, " of ", total, " at ", schedule.looks[std::min(next, total - 1)],
          " seeds per arm when its runs finish");
    }
    out.arms.push_back(std::move(arm));
  }
  return std::optional<LooksSummary>(std::move(out));
}

std::string RenderLooks(const LooksSummary& summary, bool markdown) {
  std::string out;
  const std::string title = absl::StrCat(
      "sequential seeds: looks at ", absl::StrJoin(summary.looks, ", "),
      " seeds per arm (at most ", summary.max,
      "), each variant decided against the baseline at equal steps at O'Brien–Fleming levels");
  auto looks = [](const ArmLooks& a) {
    return a.baseline ? std::string("-") : absl::StrCat(a.looks_done, "/", a.looks_total);
  };
  if (markdown) {
    absl::StrAppend(&out, "\n", title, "\n\n| arm | looks | seeds | why |\n|---|---|---:|---|\n");
    for (const ArmLooks& a : summary.arms) {
      absl::StrAppend(&out, "| ", a.variant, " | ", looks(a), " | ", a.seeds, " | ", a.why,
                      " |\n");
    }
    return out;
  }
  size_t width = 3;
  for (const ArmLooks& a : summary.arms) width = std::max(width, a.variant.size());
  absl::StrAppend(&out, title, "\n");
  absl::StrAppend(&out, absl::StrFormat("  %-*s  %-5s  %5s  %s\n", width, "arm", "looks", "seeds",
                                        "why"));
  for (const ArmLooks& a : summary.arms) {
    absl::StrAppend(&out, absl::StrFormat("  %-*s  %-5s  %5d  %s\n", width, a.variant, looks(a),
                                          a.seeds, a.why));
  }
  return out;
}

nlohmann::json LooksJson(const LooksSummary& summary) {
  nlohmann::json arms = nlohmann::json::array();
  for (const ArmLooks& a : summary.arms) {
    arms.push_back({{"variant", a.variant}, {"baseline", a.baseline},
                    {"looks_done", a.looks_done}, {"looks", a.looks_total}, {"seeds", a.seeds},
                    {"stopped", a.stopped}, {"why", a.why}});
  }
  nlohmann::json log = nlohmann::json::array();
  auto optional = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  for (const LookDecisionRecord& d : summary.decisions) {
    log.push_back({{"variant", d.variant}, {"look", d.look}, {"seeds", d.seeds},
                   {"outcome", d.outcome}, {"delta", optional(d.delta)},
                   {"ci_low", optional(d.ci_low)}, {"ci_high", optional(d.ci_high)},
                   {"tau", optional(d.tau)}, {"alpha", d.alpha},
                   {"equivalence_alpha", d.equivalence_alpha},
                   {"seeds_to_decide", d.seeds_to_decide ? nlohmann::json(*d.seeds_to_decide)
                                                         : nlohmann::json(nullptr)},
                   {"reason", d.reason}, {"decided_unix_ms", d.decided_unix_ms}});
  }
  return {{"looks", summary.looks}, {"max", summary.max}, {"shape", "obrien-fleming"},
          {"paused", summary.paused}, {"arms", arms}, {"decisions", log}};
}

}  // namespace smallem
