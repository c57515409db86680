// DashboardApi: the JSON behind the dashboard's pages, one method per
// endpoint (docs/dashboard.md lists them with their keys). Everything comes
// from the coordinator's own store and queue; the report is the one
// `smallemctl report --format json` prints (server/report, the same call),
// and the figure the SVG of `smallemctl report --plot`.
//
// No HTTP here (server/http/dashboard_server.h routes requests to these
// methods): each returns a JSON value or the absl::Status to answer with.
//
// Thread-safe (the store, queue and registry are).
#ifndef SMALLEM_SERVER_HTTP_DASHBOARD_API_H_
#define SMALLEM_SERVER_HTTP_DASHBOARD_API_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "nlohmann/json_fwd.hpp"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/store/sqlite_store.h"

namespace smallem {

class DashboardApi {
 public:
  DashboardApi(SqliteStore* store, JobQueue* queue, WorkerRegistry* workers, const Clock* clock)
      : store_(store), queue_(queue), workers_(workers), clock_(clock) {}

  // GET /api/experiments: newest first, each with its run counts by status,
  // steps done of planned and ETA; and the change counter. Experiments
  // whose every run was cancelled (IsCancelledAndEmpty) only with
  // `include_cancelled` (?all=1); "hidden" counts those left out.
  absl::StatusOr<nlohmann::json> Experiments(bool include_cancelled = false);
  // GET /api/experiments/{id or name}: the experiment, its runs (state,
  // progress, failure, result) and the report as `smallemctl report
  // --format json` prints it ("report"; "report_error" instead when the
  // report cannot be made yet) with the figure's SVG ("figure_svg").
  // NotFound for an unknown experiment.
  absl::StatusOr<nlohmann::json> Experiment(std::string_view id_or_name);
  // GET /api/runs/{id}?after_step=N: the run, its spec, attempts (with their
  // messages: the stderr tail of a failure), the diverged step if any, and
  // the current attempt's points with step > after_step.
  absl::StatusOr<nlohmann::json> Run(int64_t run_id, int64_t after_step);
  // GET /api/workers: every worker, its devices, when it was last seen and
  // the runs it holds.
  absl::StatusOr<nlohmann::json> Workers();
  // GET /api/changes?since=N: the change counter, once it differs from
  // `since` or `wait` passed (a page polls this to refresh without reload),
  // or at once after Stop.
  nlohmann::json Changes(uint64_t since, absl::Duration wait);
  // Ends every waiting Changes call now and the ones to come at once, so
  // that the server can stop without waiting out a browser's long poll.
  void Stop() { stopping_ = true; }

  // POST /api/experiments/{id}/cancel and /retry, /api/runs/{id}/cancel and
  // /retry: how many runs changed ({"changed": n}). Errors of JobQueue.
  absl::StatusOr<nlohmann::json> Cancel(const RunSelector& selector);
  absl::StatusOr<nlohmann::json> Retry(const RunSelector& selector);

  // Resolves an experiment path segment: digits are an id, anything else a
  // name. NotFound when absent.
  absl::StatusOr<ExperimentRecord> FindExperiment(std::string_view id_or_name);

 private:
  SqliteStore* const store_;
  JobQueue* const queue_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  std::atomic<bool> stopping_{false};
};

// The step at which a run diverged: the first point with a non-finite loss,
// else the step named by a "training diverged: ... at step N" message of
// one of its attempts; nullopt when it did not diverge.
std::optional<int64_t> DivergedStep(const std::vector<MetricPointRecord>& points,
                                    const std::vector<AttemptRecord>& attempts);

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_DASHBOARD_API_H_
