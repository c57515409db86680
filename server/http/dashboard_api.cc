#include "server/http/dashboard_api.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/queue/experiment_status.h"
#include "server/report/experiment_report.h"

namespace smallem {
namespace {

using nlohmann::json;

// JSON has no infinity: a diverged loss (stored as +inf) becomes null.
json JsonNumber(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json CountsJson(const RunCountsRecord& c) {
  return {{"queued", c.queued},   {"leased", c.leased},       {"succeeded", c.succeeded},
          {"failed", c.failed},   {"cancelled", c.cancelled}, {"total", c.total}};
}

json ExperimentJson(const ExperimentRecord& e, const ExperimentSummary& s) {
  return {{"id", e.id},
          {"name", e.name},
          {"baseline", e.baseline},
          {"grid_file", e.grid_file},
          {"dataset_hash", e.dataset_hash},
          {"created_unix_ms", e.created_unix_ms},
          {"updated_unix_ms", e.updated_unix_ms},
          {"counts", CountsJson(s.counts)},
          {"steps_done", s.steps_done},
          {"steps_total", s.steps_total},
          {"eta_s", JsonNumber(s.eta_s)}};
}

json ProgressJson(const ProgressRecord& p) {
  return {{"step", p.step},
          {"total_steps", p.total_steps},
          {"loss", JsonNumber(p.loss)},
          {"tokens_per_s", JsonNumber(p.tokens_per_s)},
          {"elapsed_s", JsonNumber(p.elapsed_s)},
          {"eta_s", JsonNumber(p.eta_s)},
          {"max_over_mean_load", JsonNumber(p.max_over_mean_load)}};
}

json RunJson(const RunRecord& r, const std::optional<ResultRecord>& result) {
  json out = {{"id", r.id},
              {"experiment_id", r.experiment_id},
              {"variant", r.variant},
              {"variant_kind", r.variant_kind},
              {"seed", r.seed},
              {"budget", r.budget},
              {"status", RunStatusName(r.status)},
              {"attempt", r.attempt},
              {"engine_failures", r.engine_failures},
              {"lease_losses", r.lease_losses},
              {"retry_budget", r.retry_budget},
              {"worker", r.lease_worker},
              {"device", r.lease_device},
              {"device_class", r.lease_device_class},
              {"progress", ProgressJson(r.progress)},
              {"last_failure", FailureClassName(r.last_failure)},
              {"last_error", r.last_error},
              {"updated_unix_ms", r.updated_unix_ms},
              {"result", nullptr}};
  if (result.has_value()) {
    // A result stored by an older worker may not parse; the page shows none.
    out["result"] = json::parse(result->result_json, nullptr, /*allow_exceptions=*/false);
    if (out["result"].is_discarded()) out["result"] = nullptr;
  }
  return out;
}

json PointJson(const MetricPointRecord& p) {
  return {{"attempt", p.attempt},
          {"step", p.step},
          {"loss", JsonNumber(p.loss)},
          {"tokens_per_s", JsonNumber(p.tokens_per_s)},
          {"elapsed_s", JsonNumber(p.elapsed_s)},
          {"unix_ms", p.unix_ms},
          {"max_over_mean_load", JsonNumber(p.max_over_mean_load)}};
}

json AttemptJson(const AttemptRecord& a) {
  return {{"attempt", a.attempt},       {"worker", a.worker_id},
          {"device", a.device},         {"device_class", a.device_class},
          {"started_unix_ms", a.started_unix_ms}, {"ended_unix_ms", a.ended_unix_ms},
          {"outcome", a.outcome},       {"message", a.message}};
}

}  // namespace

std::optional<int64_t> DivergedStep(const std::vector<MetricPointRecord>& points,
                                    const std::vector<AttemptRecord>& attempts) {
  for (const MetricPointRecord& p : points) {
    if (!std::isfinite(p.loss)) return p.step;
  }
  constexpr std::string_view kDiverged = "training diverged";
  constexpr std::string_view kAtStep = " at step ";
  for (const AttemptRecord& a : attempts) {
    const size_t at = a.message.find(kDiverged);
    if (at == std::string::npos) continue;
    const size_t step_at = a.message.find(kAtStep, at);
    if (step_at == std::string::npos) continue;
    const size_t begin = step_at + kAtStep.size();
    size_t end = begin;
    while (end < a.message.size() && absl::ascii_isdigit(a.message[end])) ++end;
    int64_t step = 0;
    if (absl::SimpleAtoi(absl::string_view(a.message).substr(begin, end - begin), &step)) {
      return step;
    }
  }
  return std::nullopt;
}

absl::StatusOr<ExperimentRecord> DashboardApi::FindExperiment(std::string_view id_or_name) {
  int64_t id = 0;
  const absl::string_view key(id_or_name.data(), id_or_name.size());
  if (!key.empty() && absl::SimpleAtoi(key, &id) && id > 0) {
    return store_->GetExperiment(id);
  }
  return store_->FindExperiment(id_or_name);
}

absl::StatusOr<json> DashboardApi::Experiments(bool include_cancelled) {
  const uint64_t changes = queue_->changes();  // before reading: no change is missed
  ASSIGN_OR_RETURN(std::vector<ExperimentRecord> experiments, store_->ListExperiments(1000));
  json list = json::array();
  int hidden = 0;
  for (const ExperimentRecord& e : experiments) {
    ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store_->ListRuns(e.id));
    const ExperimentSummary summary = SummarizeRuns(runs);
    if (!include_cancelled && IsCancelledAndEmpty(summary.counts)) {
      ++hidden;
      continue;
    }
    list.push_back(ExperimentJson(e, summary));
  }
  return json{{"experiments", std::move(list)}, {"hidden", hidden}, {"changes", changes}};
}

absl::StatusOr<json> DashboardApi::Experiment(std::string_view id_or_name) {
  const uint64_t changes = queue_->changes();
  ASSIGN_OR_RETURN(ExperimentRecord e, FindExperiment(id_or_name));
  ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store_->ListRuns(e.id));
  ASSIGN_OR_RETURN(std::vector<ResultRecord> results, store_->ListResults(e.id));
  std::map<int64_t, ResultRecord> by_run;
  for (ResultRecord& r : results) by_run.emplace(r.run_id, std::move(r));
  json run_list = json::array();
  for (const RunRecord& run : runs) {
    auto it = by_run.find(run.id);
    run_list.push_back(RunJson(run, it == by_run.end() ? std::nullopt
                                                       : std::optional<ResultRecord>(it->second)));
  }
  json out = {{"experiment", ExperimentJson(e, SummarizeRuns(runs))},
              {"runs", std::move(run_list)},
              {"changes", changes},
              {"report", nullptr},
              {"figure_svg", ""}};
  // Exactly what `smallemctl report EXP --format json` asks the coordinator
  // for (the defaults: both comparisons, the grid's noise floor).
  absl::StatusOr<RenderedReport> report = RenderExperimentReport(
      *store_, e, ReportOptions{.format = ReportFormat::kJson, .plot = true});
  if (report.ok()) {
    out["report"] = json::parse(report->text, nullptr, /*allow_exceptions=*/false);
    out["figure_svg"] = report->plot_svg;
  } else {
    out["report_error"] = std::string(report.status().message());
  }
  return out;
}

absl::StatusOr<json> DashboardApi::Run(int64_t run_id, int64_t after_step) {
  const uint64_t changes = queue_->changes();
  ASSIGN_OR_RETURN(RunRecord run, store_->GetRun(run_id));
  ASSIGN_OR_RETURN(ExperimentRecord e, store_->GetExperiment(run.experiment_id));
  ASSIGN_OR_RETURN(std::optional<ResultRecord> result, store_->GetResult(run.id));
  ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, store_->ListAttempts(run.id));
  ASSIGN_OR_RETURN(std::vector<MetricPointRecord> points,
                   store_->ListMetricPoints(run.id, run.attempt, after_step));
  ASSIGN_OR_RETURN(std::string spec, ComposeRunSpec(run, e.dataset_hash));
  json out = {{"run", RunJson(run, result)},
              {"experiment", {{"id", e.id}, {"name", e.name}}},
              {"spec", json::parse(spec, nullptr, /*allow_exceptions=*/false)},
              {"attempts", json::array()},
              {"points", json::array()},
              {"diverged_step", nullptr},
              {"changes", changes}};
  for (const AttemptRecord& a : attempts) out["attempts"].push_back(AttemptJson(a));
  for (const MetricPointRecord& p : points) out["points"].push_back(PointJson(p));
  // The diverged step needs every point of the attempt, not only the new ones.
  if (after_step >= 0) {
    ASSIGN_OR_RETURN(points, store_->ListMetricPoints(run.id, run.attempt, -1));
  }
  if (std::optional<int64_t> step = DivergedStep(points, attempts)) out["diverged_step"] = *step;
  return out;
}

absl::StatusOr<json> DashboardApi::Workers() {
  ASSIGN_OR_RETURN(std::vector<WorkerView> workers, workers_->List());
  json list = json::array();
  for (const WorkerView& w : workers) {
    json devices = json::parse(w.record.devices_json, nullptr, /*allow_exceptions=*/false);
    list.push_back({{"id", w.record.id},
                    {"hostname", w.record.hostname},
                    {"devices", devices.is_discarded() ? json::array() : devices},
                    {"registered_unix_ms", w.record.registered_unix_ms},
                    {"last_seen_unix_ms", w.record.last_seen_unix_ms},
                    {"leased_run_ids", w.leased_run_ids}});
  }
  return json{{"workers", std::move(list)}, {"now_unix_ms", clock_->NowUnixMs()}};
}

json DashboardApi::Changes(uint64_t since, absl::Duration wait) {
  // In short slices, to notice Stop.
  constexpr absl::Duration kSlice = absl::Milliseconds(250);
  const absl::Time give_up = absl::Now() + wait;
  while (!stopping_ && queue_->changes() == since && absl::Now() < give_up) {
    queue_->WaitForChange(since, std::min(kSlice, give_up - absl::Now()));
  }
  return json{{"changes", queue_->changes()}};
}

absl::StatusOr<json> DashboardApi::Cancel(const RunSelector& selector) {
  ASSIGN_OR_RETURN(int n, queue_->Cancel(selector));
  return json{{"changed", n}};
}

absl::StatusOr<json> DashboardApi::Retry(const RunSelector& selector) {
  ASSIGN_OR_RETURN(int n, queue_->Retry(selector));
  return json{{"changed", n}};
}

}  // namespace smallem
