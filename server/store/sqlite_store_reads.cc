// SqliteStore: reads of runs, results, attempts and metric points.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_store_rows.h"

namespace smallem {

// ---- Runs (reads) -----------------------------------------------------------

absl::StatusOr<RunRecord> SqliteStore::GetRunLocked(int64_t run_id) {
  ASSIGN_OR_RETURN(std::vector<RunRecord> runs, QueryRunsLocked("r.id = ?", run_id));
  if (runs.empty()) return absl::NotFoundError(absl::StrCat("no run with id ", run_id));
  return std::move(runs.front());
}

absl::StatusOr<std::vector<RunRecord>> SqliteStore::QueryRunsLocked(std::string_view where,
                                                                    int64_t arg) {
  // `where` is always a constant of this file: the value travels as a bound
  // parameter, never as SQL text.
  ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare(absl::StrCat(
                                          std::string(kRunSelect), " WHERE ", std::string(where), " ORDER BY r.id")));
  s.Bind(1, arg);
  std::vector<RunRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadRunRow(s));
  }
  return out;
}

absl::StatusOr<RunRecord> SqliteStore::GetRun(int64_t run_id) {
  absl::MutexLock lock(&db_mu_);
  return GetRunLocked(run_id);
}

absl::StatusOr<std::vector<RunRecord>> SqliteStore::ListRuns(int64_t experiment_id) {
  absl::MutexLock lock(&db_mu_);
  return QueryRunsLocked("r.experiment_id = ?", experiment_id);
}

absl::StatusOr<std::vector<RunRecord>> SqliteStore::ListRunsWithStatus(RunStatus status) {
  absl::MutexLock lock(&db_mu_);
  // The status names are the CHECK constraint's; bound by index keeps the
  // statement count small.
  static constexpr std::string_view kWhere[] = {
      "r.status = 'queued' AND ? = 0", "r.status = 'leased' AND ? = 0",
      "r.status = 'succeeded' AND ? = 0", "r.status = 'failed' AND ? = 0",
      "r.status = 'cancelled' AND ? = 0", "r.status = 'diverged' AND ? = 0"};
  return QueryRunsLocked(kWhere[static_cast<int>(status)], 0);
}

namespace {

ResultRecord ReadResult(const SqliteStatement& s) {
  return ResultRecord{.run_id = s.ColumnInt(0), .attempt = static_cast<int>(s.ColumnInt(1)),
                      .result_json = s.ColumnText(2), .created_unix_ms = s.ColumnInt(3)};
}

}  // namespace

absl::StatusOr<std::optional<ResultRecord>> SqliteStore::GetResult(int64_t run_id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT run_id, attempt, result_json, created_unix_ms "
                                "FROM results WHERE run_id = ?"));
  s.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return std::optional<ResultRecord>();
  return std::optional<ResultRecord>(ReadResult(s));
}

absl::StatusOr<std::vector<ResultRecord>> SqliteStore::ListResults(int64_t experiment_id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT s.run_id, s.attempt, s.result_json, s.created_unix_ms "
                                "FROM results s JOIN runs r ON r.id = s.run_id "
                                "WHERE r.experiment_id = ? ORDER BY s.run_id"));
  s.Bind(1, experiment_id);
  std::vector<ResultRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadResult(s));
  }
  return out;
}

absl::StatusOr<std::vector<AttemptRecord>> SqliteStore::ListAttempts(int64_t run_id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT run_id, attempt, worker_id, device, device_class, "
                                "started_unix_ms, ended_unix_ms, outcome, message "
                                "FROM attempts WHERE run_id = ? ORDER BY attempt"));
  s.Bind(1, run_id);
  std::vector<AttemptRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(AttemptRecord{
        .run_id = s.ColumnInt(0), .attempt = static_cast<int>(s.ColumnInt(1)),
        .worker_id = s.ColumnText(2), .device = s.ColumnText(3),
        .device_class = s.ColumnText(4), .started_unix_ms = s.ColumnInt(5),
        .ended_unix_ms = s.ColumnInt(6), .outcome = s.ColumnText(7),
        .message = s.ColumnText(8)});
  }
  return out;
}

absl::StatusOr<std::vector<MetricPointRecord>> SqliteStore::ListMetricPoints(
    int64_t run_id, int attempt, int64_t after_step) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT attempt, step, loss, tokens_per_s, elapsed_s, unix_ms, "
                                "max_over_mean_load "
                                "FROM metric_points WHERE run_id = ? AND attempt = ? "
                                "AND step > ? ORDER BY step"));
  s.Bind(1, run_id).Bind(2, attempt).Bind(3, after_step);
  std::vector<MetricPointRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(MetricPointRecord{.attempt = static_cast<int>(s.ColumnInt(0)),
                                    .step = s.ColumnInt(1), .loss = s.ColumnDouble(2),
                                    .tokens_per_s = s.ColumnDouble(3),
                                    .elapsed_s = s.ColumnDouble(4), .unix_ms = s.ColumnInt(5),
                                    .max_over_mean_load = s.ColumnDouble(6)});
  }
  return out;
}

}  // namespace smallem
