#include "server/report/experiment_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/queue/sequential_looks.h"
#include "server/report/report_text.h"
#include "runspec/run_result.h"

namespace smallem {

absl::StatusOr<ComparedRun> ToComparedRun(const RunRecord& run,
                                          const std::optional<ResultRecord>& result) {
  ComparedRun c;
  c.variant = run.variant;
  c.seed = run.seed;
  c.budget = Budget{.steps = run.budget_steps, .minutes = run.budget_minutes};
  switch (run.status) {
    case RunStatus::kQueued: c.state = RunState::kPending; break;
    case RunStatus::kLeased: c.state = RunState::kRunning; break;
    case RunStatus::kFailed: c.state = RunState::kFailed; break;
    case RunStatus::kCancelled: c.state = RunState::kCancelled; break;
    case RunStatus::kSucceeded: c.state = RunState::kSucceeded; break;
    case RunStatus::kDiverged:
      c.state = RunState::kDiverged;
      c.diverged_step = run.diverged_step;
      break;
  }
  if (c.state != RunState::kSucceeded) return c;
  if (!result) {
    return absl::InternalError(absl::StrCat("run ", run.id, " succeeded without a result"));
  }
  // (Complete checks the result's types; a result stored before it did may
  // still hold anything, and a report never throws on stored data.)
  absl::StatusOr<RunResult> r =
      RunResult::FromStoredJson(nlohmann::json::parse(result->result_json, nullptr, false));
  if (!r.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", run.id, ": its result has ", r.status().message()));
  }
  c.val_nats_per_byte = r->val_nats_per_byte;
  if (r->train_seconds) c.train_seconds = *r->train_seconds;
  if (r->params) {
    c.params = *r->params;
    c.total_params = c.params;
  }
  // A mixture of experts: the comparison's size is what a token uses.
  if (r->active_params) c.params = *r->active_params;
  c.kv_cache_bytes_per_token = r->kv_cache_bytes_per_token;
  c.tokens_per_s = r->tokens_per_s;
  c.generation_tokens_per_s = r->generation_tokens_per_s;
  c.device_class = r->device_class.value_or(run.lease_device_class);
  if (r->steps) c.steps = *r->steps;
  c.eval_fingerprint = r->eval_fingerprint.value_or("");
  return c;
}

absl::StatusOr<std::vector<TrainingCurve>> ReadTrainingCurves(
    SqliteStore& store, const ComparisonPlan& plan, const std::vector<RunRecord>& runs,
    const std::map<int64_t, ResultRecord>& results) {
  std::vector<TrainingCurve> curves;
  for (const RunRecord& run : runs) {
    if (run.status != RunStatus::kSucceeded || run.variant_kind == "reference" ||
        run.budget_steps != plan.budget.steps || run.budget_minutes != plan.budget.minutes ||
        std::ranges::count(plan.SeedsOf(run.variant), run.seed) == 0 ||
        std::find(plan.variants.begin(), plan.variants.end(), run.variant) ==
            plan.variants.end()) {
      continue;
    }
    auto it = results.find(run.id);
    if (it == results.end()) continue;
    const absl::StatusOr<RunResult> r =
        RunResult::FromStoredJson(nlohmann::json::parse(it->second.result_json, nullptr, false));
    if (!r.ok() || !r->val_nats_per_token) continue;
    const double per_token = *r->val_nats_per_token;
    if (!(per_token > 0)) continue;
    const double tokens_per_byte = r->val_nats_per_byte / per_token;
    std::map<int64_t, double> by_step;  // later attempts replace earlier ones
    for (int attempt = 1; attempt <= run.attempt; ++attempt) {
      ASSIGN_OR_RETURN(std::vector<MetricPointRecord> points,
                       store.ListMetricPoints(run.id, attempt, /*after_step=*/0));
      for (const MetricPointRecord& p : points) by_step[p.step] = p.loss;
    }
    TrainingCurve c{.variant = run.variant,
                    .seed = run.seed,
                    .device_class = run.lease_device_class,
                    .points = {}};
    if (r->device_class) c.device_class = *r->device_class;
    for (const auto& [step, loss] : by_step) {
      if (std::isfinite(loss)) c.points.push_back({static_cast<double>(step), loss * tokens_per_byte});
    }
    curves.push_back(std::move(c));
  }
  return curves;
}

absl::StatusOr<RenderedReport> RenderExperimentReport(SqliteStore& store,
                                                      const ExperimentRecord& experiment,
                                                      const ReportOptions& options) {
  ASSIGN_OR_RETURN(Grid grid, ParseGrid(experiment.grid_yaml, experiment.grid_file));
  ComparisonPlan plan = ComparisonPlan::ForGrid(grid);
  if (options.noise_floor > 0) plan.noise_floor = options.noise_floor;

  ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store.ListRuns(experiment.id));
  ASSIGN_OR_RETURN(std::vector<ResultRecord> results, store.ListResults(experiment.id));
  std::map<int64_t, ResultRecord> by_run;
  for (ResultRecord& r : results) by_run.emplace(r.run_id, std::move(r));

  RenderedReport out;
  std::vector<ComparedRun> compared;
  compared.reserve(runs.size());
  for (const RunRecord& run : runs) {
    auto it = by_run.find(run.id);
    std::optional<ResultRecord> result;
    if (it != by_run.end()) {
      result = it->second;
      ++out.runs_done;
    }
    ASSIGN_OR_RETURN(ComparedRun c, ToComparedRun(run, result));
    compared.push_back(std::move(c));
  }
  out.runs_total = static_cast<int>(runs.size());
  // Sequential seeds: each arm is compared on the seeds its looks gave it.
  ASSIGN_OR_RETURN(std::vector<LookDecisionRecord> decisions,
                   store.ListLookDecisions(experiment.id));
  ASSIGN_OR_RETURN(std::optional<LooksSummary> looks,
                   SummarizeLooks(experiment, runs, decisions));
  if (looks && grid.sequential) {
    for (const ArmLooks& arm : looks->arms) {
      const int n = std::clamp(arm.seeds, static_cast<int>(grid.sequential->start.size()),
                               grid.sequential->max);
      plan.arm_seeds[arm.variant] = grid.sequential->SeedsUpTo(n);
    }
  }
  if (options.noise_only) {
    ASSIGN_OR_RETURN(out.text, RenderNoiseReport(plan, compared, options.format));
    return out;
  }
  ASSIGN_OR_RETURN(out.text,
                   RenderFullReport(plan, compared,
                                    FullReportOptions{.at = options.at, .format = options.format,
                                                      .noise = true, .plot_path = ""}));
  if (looks) {
    if (options.format == ReportFormat::kJson) {
      nlohmann::json j = nlohmann::json::parse(out.text, nullptr, false);
      if (j.is_object()) {
        j["sequential"] = LooksJson(*looks);
        out.text = j.dump(2) + "\n";
      }
    } else if (options.format != ReportFormat::kCsv) {
      absl::StrAppend(&out.text, "\n",
                      RenderLooks(*looks, options.format == ReportFormat::kMarkdown));
    }
  }
  // Runs that continued from a checkpoint (docs/reliability.md), and why
  // their earlier attempts ended: a worker lost (its lease expired) or one
  // stopped and handing the run back (Ctrl-C of `smallemctl run`, a
  // scheduler's SIGTERM) — not the same news.
  int resumed_runs = 0;
  int64_t resumes = 0;
  bool lost = false, stopped = false;
  for (const auto& [id, r] : by_run) {
    const absl::StatusOr<RunResult> result =
        RunResult::FromStoredJson(nlohmann::json::parse(r.result_json, nullptr, false));
    if (!result.ok() || !result->resumes) continue;
    const int64_t n = *result->resumes;
    if (n <= 0) continue;
    ++resumed_runs;
    resumes += n;
    ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, store.ListAttempts(id));
    for (const AttemptRecord& a : attempts) {
      lost |= a.outcome == FailureClassName(FailureClass::kLeaseLost);
      stopped |= a.outcome == kReleasedOutcome;
    }
  }
  if (resumed_runs > 0 && (options.format == ReportFormat::kTable ||
                           options.format == ReportFormat::kMarkdown)) {
    const char* why = lost && stopped ? " after being stopped or losing a worker"
                      : lost          ? " after losing a worker"
                      : stopped       ? " after being stopped and started again"
                                      : "";
    absl::StrAppend(&out.text, options.format == ReportFormat::kMarkdown ? "\n- " : "note: ",
                    CountedNoun(resumed_runs, "run", "runs"), " resumed from a checkpoint", why,
                    " (", CountedNoun(resumes, "resume", "resumes"), " in all)\n");
  }
  // Multi-token prediction: the params column counts the model that
  // generates; its extra depths train too, and cost what they cost.
  if (options.format == ReportFormat::kTable || options.format == ReportFormat::kMarkdown) {
    std::map<std::string, std::string> mtp_notes;  // variant → its note
    for (const RunRecord& run : runs) {
      auto it = by_run.find(run.id);
      if (it == by_run.end() || mtp_notes.count(run.variant)) continue;
      const absl::StatusOr<RunResult> r =
          RunResult::FromStoredJson(nlohmann::json::parse(it->second.result_json, nullptr, false));
      if (!r.ok() || !r->mtp_params || !r->params) continue;
      const int64_t mtp = *r->mtp_params;
      const int64_t params = *r->params;
      const int64_t depths = r->config.is_object() && r->config.contains("mtp") &&
                                     r->config["mtp"].is_number_integer()
                                 ? r->config["mtp"].get<int64_t>()
                                 : 0;
      if (mtp <= 0) continue;
      mtp_notes[run.variant] = absl::StrCat(
          run.variant, " trains ", report_internal::Grouped(params + mtp),
          " parameters: the params column's ", report_internal::Grouped(params),
          ", which generate, and ", report_internal::Grouped(mtp), " in its ",
          depths > 0 ? CountedNoun(depths, "multi-token-prediction depth",
                                   "multi-token-prediction depths")
                     : std::string("multi-token-prediction depths"),
          ", which only training uses");
    }
    for (const auto& [variant, note] : mtp_notes) {
      absl::StrAppend(&out.text, options.format == ReportFormat::kMarkdown ? "\n- " : "note: ",
                      note, "\n");
    }
  }
  if (options.plot) {
    ASSIGN_OR_RETURN(std::vector<TrainingCurve> curves,
                     ReadTrainingCurves(store, plan, runs, by_run));
    ASSIGN_OR_RETURN(out.plot_svg, RenderReportPlotSvg(plan, compared, curves));
  }
  return out;
}

}  // namespace smallem
