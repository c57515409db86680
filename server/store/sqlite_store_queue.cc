// SqliteStore: the queue's transitions — lease, heartbeat, complete, fail,
// release, reap, cancel, retry — each one transaction that checks the lease it acts
// under before writing.
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_store_rows.h"

namespace smallem {

RunRecord ReadRunRow(const SqliteStatement& s) {
  RunRecord r;
  r.id = s.ColumnInt(0);
  r.experiment_id = s.ColumnInt(1);
  r.variant_id = s.ColumnInt(2);
  r.variant = s.ColumnText(3);
  r.variant_kind = s.ColumnText(4);
  r.spec_json = s.ColumnText(5);
  r.spec_hash = s.ColumnText(6);
  r.seed = s.ColumnInt(7);
  r.budget = s.ColumnText(8);
  if (!s.ColumnIsNull(9)) r.budget_steps = s.ColumnInt(9);
  if (!s.ColumnIsNull(10)) r.budget_minutes = s.ColumnDouble(10);
  absl::StatusOr<RunStatus> status = ParseRunStatus(s.ColumnText(11));
  CHECK(status.ok()) << "runs.status has a CHECK constraint: " << status.status();
  r.status = *status;
  r.attempt = static_cast<int>(s.ColumnInt(12));
  r.engine_failures = static_cast<int>(s.ColumnInt(13));
  r.lease_losses = static_cast<int>(s.ColumnInt(14));
  r.retry_budget = static_cast<int>(s.ColumnInt(15));
  r.lease_worker = s.ColumnText(16);
  r.lease_device = s.ColumnText(17);
  r.lease_device_class = s.ColumnText(18);
  r.lease_expires_unix_ms = s.ColumnInt(19);
  r.progress = ProgressRecord{.step = s.ColumnInt(20), .total_steps = s.ColumnInt(21),
                              .loss = s.ColumnDouble(22), .tokens_per_s = s.ColumnDouble(23),
                              .elapsed_s = s.ColumnDouble(24), .eta_s = s.ColumnDouble(25),
                              .max_over_mean_load = s.ColumnDouble(32)};
  r.last_failure = ParseFailureClass(s.ColumnText(26));
  r.last_error = s.ColumnText(27);
  r.created_unix_ms = s.ColumnInt(28);
  r.updated_unix_ms = s.ColumnInt(29);
  r.diverged_step = s.ColumnInt(30);
  if (!s.ColumnIsNull(31)) r.last_finite_loss = s.ColumnDouble(31);
  return r;
}

absl::Status CheckLease(const RunRecord& run, int attempt, std::string_view worker_id,
                        int64_t now_ms) {
  auto reject = [&](auto&&... why) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run.id, " attempt ", attempt, ": ", why...));
  };
  if (attempt > run.attempt) {
    // Never a superseded attempt: one the coordinator has not handed out.
    if (run.attempt == 0) {
      return reject("the run was never leased (it is ", RunStatusName(run.status),
                    "); write only under the attempt a Lease gave");
    }
    return reject("no such attempt: the run's latest attempt is ", run.attempt,
                  "; write only under the attempt a Lease gave");
  }
  if (attempt < run.attempt) {
    return reject("superseded by attempt ", run.attempt, "; stop this attempt");
  }
  if (run.status == RunStatus::kCancelled) return reject("the run was cancelled");
  if (run.status != RunStatus::kLeased) {
    return reject("no longer holds a lease (the run is ", RunStatusName(run.status),
                  "); its lease expired or it already ended");
  }
  if (run.lease_worker != worker_id) {
    return reject("leased to worker \"", run.lease_worker, "\", not \"", std::string(worker_id), "\"");
  }
  if (now_ms > run.lease_expires_unix_ms) {
    return reject("lease expired ", now_ms - run.lease_expires_unix_ms,
                  " ms ago; heartbeat more often than the lease duration");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LeaseRecord>> SqliteStore::LeaseNextRun(
    std::string_view worker_id, std::string_view device, std::string_view device_class,
    int64_t now_ms, int64_t expires_ms) {
  std::optional<LeaseRecord> out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    int64_t run_id = 0;
    {
      // A run with a checkpoint resumes only on the device class that wrote
      // it (timed comparisons must not mix classes).
      ASSIGN_OR_RETURN(SqliteStatement next,
                       db_->Prepare("SELECT id FROM runs WHERE status = 'queued' AND NOT EXISTS "
                                    "(SELECT 1 FROM checkpoints c WHERE c.run_id = runs.id AND "
                                    "c.complete = 1 AND c.device_class != ?) "
                                    "ORDER BY id LIMIT 1"));
      next.Bind(1, device_class);
      ASSIGN_OR_RETURN(bool found, next.Step());
      if (!found) return absl::OkStatus();
      run_id = next.ColumnInt(0);
    }
    {
      ASSIGN_OR_RETURN(SqliteStatement lease,
                       db_->Prepare("UPDATE runs SET status = 'leased', attempt = attempt + 1, "
                                    "lease_worker = ?, lease_device = ?, lease_device_class = ?, "
                                    "lease_expires_unix_ms = ?, progress_step = 0, "
                                    "progress_total_steps = 0, progress_loss = 0, "
                                    "progress_tokens_per_s = 0, progress_elapsed_s = 0, "
                                    "progress_eta_s = 0, progress_max_over_mean_load = 0, "
                                    "updated_unix_ms = ? WHERE id = ?"));
      lease.Bind(1, worker_id).Bind(2, device).Bind(3, device_class).Bind(4, expires_ms)
          .Bind(5, now_ms).Bind(6, run_id);
      RETURN_IF_ERROR(lease.Run());
    }
    ASSIGN_OR_RETURN(RunRecord run, GetRunLocked(run_id));
    {
      ASSIGN_OR_RETURN(SqliteStatement attempt,
                       db_->Prepare("INSERT INTO attempts (run_id, attempt, worker_id, device, "
                                    "device_class, started_unix_ms) VALUES (?, ?, ?, ?, ?, ?)"));
      attempt.Bind(1, run_id).Bind(2, run.attempt).Bind(3, worker_id).Bind(4, device)
          .Bind(5, device_class).Bind(6, now_ms);
      RETURN_IF_ERROR(attempt.Run());
    }
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT dataset_hash FROM experiments WHERE id = ?"));
    s.Bind(1, run.experiment_id);
    ASSIGN_OR_RETURN(bool found, s.Step());
    CHECK(found) << "run " << run_id << " has no experiment";
    out = LeaseRecord{.run = std::move(run), .dataset_hash = s.ColumnText(0)};
    return absl::OkStatus();
  }));
  return out;
}

absl::Status SqliteStore::InsertPointsLocked(int64_t run_id, int attempt,
                                             const std::vector<ProgressRecord>& points,
                                             int64_t now_ms) {
  if (points.empty()) return absl::OkStatus();
  for (const ProgressRecord& p : points) {
    // OR IGNORE: a heartbeat retried after a lost reply carries the same
    // points again.
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT OR IGNORE INTO metric_points (run_id, attempt, step, "
                                  "loss, tokens_per_s, elapsed_s, unix_ms, max_over_mean_load) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    s.Bind(1, run_id).Bind(2, attempt).Bind(3, p.step).Bind(4, p.loss).Bind(5, p.tokens_per_s)
        .Bind(6, p.elapsed_s).Bind(7, now_ms).Bind(8, p.max_over_mean_load);
    RETURN_IF_ERROR(s.Run());
  }
  const ProgressRecord& last = points.back();
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("UPDATE runs SET progress_step = ?, progress_total_steps = ?, "
                                "progress_loss = ?, progress_tokens_per_s = ?, "
                                "progress_elapsed_s = ?, progress_eta_s = ?, "
                                "progress_max_over_mean_load = ? "
                                "WHERE id = ? AND progress_step <= ?"));
  s.Bind(1, last.step).Bind(2, last.total_steps).Bind(3, last.loss).Bind(4, last.tokens_per_s)
      .Bind(5, last.elapsed_s).Bind(6, last.eta_s).Bind(7, last.max_over_mean_load)
      .Bind(8, run_id).Bind(9, last.step);
  return s.Run();
}

absl::Status SqliteStore::EndAttemptLocked(int64_t run_id, int attempt, std::string_view outcome,
                                           std::string_view message, int64_t now_ms) {
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("UPDATE attempts SET ended_unix_ms = ?, outcome = ?, "
                                "message = ? WHERE run_id = ? AND attempt = ?"));
  s.Bind(1, now_ms).Bind(2, outcome).Bind(3, message).Bind(4, run_id).Bind(5, attempt);
  return s.Run();
}

absl::StatusOr<HeartbeatOutcome> SqliteStore::Heartbeat(
    int64_t run_id, int attempt, std::string_view worker_id,
    const std::vector<ProgressRecord>& points, int64_t now_ms, int64_t expires_ms) {
  HeartbeatOutcome out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunRecord run, GetRunLocked(run_id));
    if (run.status == RunStatus::kCancelled && run.attempt == attempt &&
        run.lease_worker == worker_id) {
      out.cancel = true;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(CheckLease(run, attempt, worker_id, now_ms));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("UPDATE runs SET lease_expires_unix_ms = ?, "
                                    "updated_unix_ms = ? WHERE id = ?"));
      s.Bind(1, expires_ms).Bind(2, now_ms).Bind(3, run_id);
      RETURN_IF_ERROR(s.Run());
    }
    out.lease_expires_unix_ms = expires_ms;
    return InsertPointsLocked(run_id, attempt, points, now_ms);
  }));
  return out;
}

absl::StatusOr<bool> SqliteStore::Complete(int64_t run_id, int attempt,
                                           std::string_view worker_id,
                                           std::string_view result_json,
                                           const std::vector<ProgressRecord>& points,
                                           int64_t now_ms) {
  bool duplicate = false;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunRecord run, GetRunLocked(run_id));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT r.attempt, r.result_json, a.worker_id "
                                    "FROM results r LEFT JOIN attempts a "
                                    "ON a.run_id = r.run_id AND a.attempt = r.attempt "
                                    "WHERE r.run_id = ?"));
      s.Bind(1, run_id);
      ASSIGN_OR_RETURN(bool found, s.Step());
      if (found) {
        const int recorded = static_cast<int>(s.ColumnInt(0));
        if (recorded == attempt) {
          // The reply to the first Complete was lost and the worker sent it
          // again: already recorded, nothing to do. Only that worker, with
          // that result, is told so; anyone else learns nothing from an OK.
          const std::string recorded_worker = s.ColumnText(2);
          if (recorded_worker != worker_id) {
            return absl::FailedPreconditionError(absl::StrCat(
                "run ", run_id, " attempt ", attempt, ": its result was recorded for worker \"",
                recorded_worker, "\", not \"", std::string(worker_id), "\""));
          }
          if (s.ColumnText(1) != result_json) {
            return absl::FailedPreconditionError(absl::StrCat(
                "run ", run_id, " attempt ", attempt,
                ": already recorded with a different result; a result is recorded once"));
          }
          duplicate = true;
          return absl::OkStatus();
        }
        return absl::FailedPreconditionError(
            absl::StrCat("run ", run_id, " attempt ", attempt,
                         ": the run already has the result of attempt ", recorded));
      }
    }
    RETURN_IF_ERROR(CheckLease(run, attempt, worker_id, now_ms));
    RETURN_IF_ERROR(InsertPointsLocked(run_id, attempt, points, now_ms));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("INSERT INTO results (run_id, attempt, result_json, "
                                    "created_unix_ms) VALUES (?, ?, ?, ?)"));
      s.Bind(1, run_id).Bind(2, attempt).Bind(3, result_json).Bind(4, now_ms);
      RETURN_IF_ERROR(s.Run());
    }
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("UPDATE runs SET status = 'succeeded', "
                                    "lease_expires_unix_ms = 0, updated_unix_ms = ? "
                                    "WHERE id = ?"));
      s.Bind(1, now_ms).Bind(2, run_id);
      RETURN_IF_ERROR(s.Run());
    }
    RETURN_IF_ERROR(EndAttemptLocked(run_id, attempt, "succeeded", "", now_ms));
    // This result may end a look of sequential seeds: decided in this same
    // transaction, so no reader ever sees the look's runs all finished and
    // the next look's not yet queued.
    MaybeDecideLooksLocked(run.experiment_id, now_ms);
    return absl::OkStatus();
  }));
  return duplicate;
}

absl::StatusOr<RunRecord> SqliteStore::FailLocked(const RunRecord& run, FailureClass failure,
                                                  std::string_view message, int64_t now_ms,
                                                  DecideFn decide,
                                                  const DivergenceRecord& divergence) {
  RunRecord after = run;
  if (failure == FailureClass::kEngineError) ++after.engine_failures;
  if (failure == FailureClass::kLeaseLost) ++after.lease_losses;
  after.last_failure = failure;
  after.last_error = std::string(message);
  after.status = decide(after);
  CHECK(after.status == RunStatus::kQueued || after.status == RunStatus::kFailed ||
        (after.status == RunStatus::kDiverged && failure == FailureClass::kDiverged))
      << "a failed attempt leaves its run queued or failed, not " << RunStatusName(after.status);
  if (failure == FailureClass::kDiverged) {
    after.diverged_step = divergence.step;
    after.last_finite_loss = divergence.last_finite_loss;
  }
  after.lease_expires_unix_ms = 0;
  after.updated_unix_ms = now_ms;
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("UPDATE runs SET status = ?, engine_failures = ?, "
                                "lease_losses = ?, last_failure = ?, last_error = ?, "
                                "lease_expires_unix_ms = 0, updated_unix_ms = ?, "
                                "diverged_step = ?, last_finite_loss = ? WHERE id = ?"));
  s.Bind(1, RunStatusName(after.status)).Bind(2, after.engine_failures)
      .Bind(3, after.lease_losses).Bind(4, FailureClassName(failure)).Bind(5, message)
      .Bind(6, now_ms).Bind(7, after.diverged_step);
  if (after.last_finite_loss.has_value()) s.Bind(8, *after.last_finite_loss);
  else s.BindNull(8);
  s.Bind(9, run.id);
  RETURN_IF_ERROR(s.Run());
  RETURN_IF_ERROR(EndAttemptLocked(run.id, run.attempt, FailureClassName(failure), message,
                                   now_ms));
  return after;
}

absl::StatusOr<RunRecord> SqliteStore::Fail(int64_t run_id, int attempt,
                                            std::string_view worker_id, FailureClass failure,
                                            std::string_view message, int64_t now_ms,
                                            DecideFn decide,
                                            const DivergenceRecord& divergence) {
  CHECK(failure != FailureClass::kNone) << "Fail needs a failure class";
  RunRecord out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunRecord run, GetRunLocked(run_id));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT outcome FROM attempts WHERE run_id = ? AND "
                                    "attempt = ? AND worker_id = ?"));
      s.Bind(1, run_id).Bind(2, attempt).Bind(3, worker_id);
      ASSIGN_OR_RETURN(bool found, s.Step());
      // A repeat of this very failure (its reply was lost): already recorded.
      if (found && s.ColumnText(0) == FailureClassName(failure)) {
        out = std::move(run);
        return absl::OkStatus();
      }
    }
    RETURN_IF_ERROR(CheckLease(run, attempt, worker_id, now_ms));
    ASSIGN_OR_RETURN(out, FailLocked(run, failure, message, now_ms, decide, divergence));
    // A diverged seed ends its arm's look too (the arm stops diverged).
    if (out.status == RunStatus::kDiverged) MaybeDecideLooksLocked(run.experiment_id, now_ms);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<RunRecord> SqliteStore::Release(int64_t run_id, int attempt,
                                               std::string_view worker_id,
                                               std::string_view reason, int64_t now_ms) {
  RunRecord out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(RunRecord run, GetRunLocked(run_id));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT outcome FROM attempts WHERE run_id = ? AND "
                                    "attempt = ? AND worker_id = ?"));
      s.Bind(1, run_id).Bind(2, attempt).Bind(3, worker_id);
      ASSIGN_OR_RETURN(bool found, s.Step());
      // A repeat of this release (its reply was lost): already recorded.
      if (found && s.ColumnText(0) == kReleasedOutcome) {
        out = std::move(run);
        return absl::OkStatus();
      }
    }
    RETURN_IF_ERROR(CheckLease(run, attempt, worker_id, now_ms));
    // The counters and last_failure stay as they were: a release is no
    // failure of the run, only of the machine it ran on.
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("UPDATE runs SET status = 'queued', lease_expires_unix_ms = 0, "
                                  "updated_unix_ms = ? WHERE id = ?"));
    s.Bind(1, now_ms).Bind(2, run_id);
    RETURN_IF_ERROR(s.Run());
    RETURN_IF_ERROR(EndAttemptLocked(run_id, attempt, kReleasedOutcome, reason, now_ms));
    out = std::move(run);
    out.status = RunStatus::kQueued;
    out.lease_expires_unix_ms = 0;
    out.updated_unix_ms = now_ms;
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<RunRecord>> SqliteStore::ReapExpiredLeases(int64_t now_ms,
                                                                      DecideFn decide) {
  {
    // Checked outside a write first: the common case (nothing expired)
    // costs one read, not a commit.
    absl::MutexLock lock(&db_mu_);
    ASSIGN_OR_RETURN(std::vector<RunRecord> expired,
                     QueryRunsLocked("r.status = 'leased' AND r.lease_expires_unix_ms < ?",
                                     now_ms));
    if (expired.empty()) return expired;
  }
  std::vector<RunRecord> out;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<RunRecord> expired,
                     QueryRunsLocked("r.status = 'leased' AND r.lease_expires_unix_ms < ?",
                                     now_ms));
    for (const RunRecord& run : expired) {
      ASSIGN_OR_RETURN(RunRecord after,
                       FailLocked(run, FailureClass::kLeaseLost,
                                  absl::StrCat("lease of worker \"", run.lease_worker,
                                               "\" expired without a heartbeat"),
                                  now_ms, decide, DivergenceRecord{}));
      out.push_back(std::move(after));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<int64_t>> SqliteStore::SelectRunIdsLocked(const RunSelector& selector,
                                                                     std::string_view statuses) {
  std::vector<int64_t> ids;
  if (selector.experiment_id > 0) {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare(absl::StrCat("SELECT id FROM runs WHERE experiment_id = ? "
                                               "AND status IN (", std::string(statuses), ") ORDER BY id")));
    s.Bind(1, selector.experiment_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      ids.push_back(s.ColumnInt(0));
    }
    return ids;
  }
  for (int64_t id : selector.run_ids) {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare(absl::StrCat("SELECT id FROM runs WHERE id = ? "
                                               "AND status IN (", std::string(statuses), ")")));
    s.Bind(1, id);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<int> SqliteStore::Cancel(const RunSelector& selector, int64_t now_ms) {
  int count = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                     SelectRunIdsLocked(selector, "'queued', 'leased'"));
    for (int64_t id : ids) {
      {
        // The running attempt (if any) ends now; its worker hears it at the
        // next heartbeat.
        ASSIGN_OR_RETURN(SqliteStatement s,
                         db_->Prepare("UPDATE attempts SET ended_unix_ms = ?, outcome = "
                                      "'cancelled' WHERE run_id = ? AND outcome = '' AND "
                                      "attempt = (SELECT attempt FROM runs WHERE id = ?)"));
        s.Bind(1, now_ms).Bind(2, id).Bind(3, id);
        RETURN_IF_ERROR(s.Run());
      }
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("UPDATE runs SET status = 'cancelled', "
                                    "lease_expires_unix_ms = 0, updated_unix_ms = ? "
                                    "WHERE id = ?"));
      s.Bind(1, now_ms).Bind(2, id);
      RETURN_IF_ERROR(s.Run());
    }
    count = static_cast<int>(ids.size());
    return absl::OkStatus();
  }));
  return count;
}

absl::StatusOr<int> SqliteStore::Retry(const RunSelector& selector, int64_t now_ms) {
  int count = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                     SelectRunIdsLocked(selector, "'failed', 'cancelled'"));
    for (int64_t id : ids) {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("UPDATE runs SET status = 'queued', engine_failures = 0, "
                                    "lease_losses = 0, updated_unix_ms = ? WHERE id = ?"));
      s.Bind(1, now_ms).Bind(2, id);
      RETURN_IF_ERROR(s.Run());
    }
    count = static_cast<int>(ids.size());
    return absl::OkStatus();
  }));
  return count;
}

}  // namespace smallem
