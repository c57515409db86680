// SqliteStore: totals an operator watches (/metrics).
#include "base/status_macros.h"
#include "server/store/sqlite_store.h"

namespace smallem {

absl::StatusOr<StoreStats> SqliteStore::Stats() {
  StoreStats stats;
  stats.commits = commits_.load(std::memory_order_relaxed);
  stats.commit_seconds_sum = commit_nanos_.load(std::memory_order_relaxed) * 1e-9;
  absl::MutexLock lock(&db_mu_);
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT status, COUNT(*) FROM runs GROUP BY status"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      const int n = static_cast<int>(s.ColumnInt(1));
      ASSIGN_OR_RETURN(RunStatus status, ParseRunStatus(s.ColumnText(0)));
      switch (status) {
        case RunStatus::kQueued: stats.runs.queued = n; break;
        case RunStatus::kLeased: stats.runs.leased = n; break;
        case RunStatus::kSucceeded: stats.runs.succeeded = n; break;
        case RunStatus::kFailed: stats.runs.failed = n; break;
        case RunStatus::kCancelled: stats.runs.cancelled = n; break;
        case RunStatus::kDiverged: stats.runs.diverged = n; break;
      }
      stats.runs.total += n;
    }
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT COUNT(*), COALESCE(SUM(outcome = 'lease_lost'), 0) "
                                  "FROM attempts"));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      stats.attempts = s.ColumnInt(0);
      stats.leases_lost = s.ColumnInt(1);
    }
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT COUNT(*), COALESCE(SUM(total_bytes), 0) FROM datasets "
                                  "WHERE complete = 1"));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      stats.datasets = s.ColumnInt(0);
      stats.dataset_bytes = s.ColumnInt(1);
    }
  }
  return stats;
}

}  // namespace smallem
