// SqliteStore: runs' checkpoints, stored as chunks, the last complete one
// per run (docs/reliability.md).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/sqlite_store.h"

namespace smallem {

absl::Status SqliteStore::PutCheckpointChunk(const CheckpointRecord& c,
                                             std::string_view worker_id, int64_t offset,
                                             std::string_view data, int64_t now_ms) {
  return Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const RunRecord run, GetRunLocked(c.run_id));
    RETURN_IF_ERROR(CheckLease(run, c.attempt, worker_id, now_ms));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("SELECT complete FROM checkpoints WHERE run_id = ? AND "
                                    "sha256 = ?"));
      s.Bind(1, c.run_id).Bind(2, c.sha256);
      ASSIGN_OR_RETURN(bool found, s.Step());
      if (found && s.ColumnInt(0) == 1) return absl::OkStatus();
    }
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("INSERT OR IGNORE INTO checkpoints (run_id, sha256, attempt, "
                                    "step, device_class, total_bytes, created_unix_ms) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?)"));
      s.Bind(1, c.run_id).Bind(2, c.sha256).Bind(3, c.attempt).Bind(4, c.step)
          .Bind(5, run.lease_device_class).Bind(6, c.total_bytes).Bind(7, now_ms);
      RETURN_IF_ERROR(s.Run());
    }
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT OR REPLACE INTO checkpoint_chunks (run_id, sha256, "
                                  "file_offset, data) VALUES (?, ?, ?, ?)"));
    s.Bind(1, c.run_id).Bind(2, c.sha256).Bind(3, offset).BindBlob(4, data);
    return s.Run();
  });
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> SqliteStore::ListCheckpointChunks(
    int64_t run_id, std::string_view sha256) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT file_offset, length(data) FROM checkpoint_chunks "
                                "WHERE run_id = ? AND sha256 = ? ORDER BY file_offset"));
  s.Bind(1, run_id).Bind(2, sha256);
  std::vector<std::pair<int64_t, int64_t>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.ColumnInt(0), s.ColumnInt(1));
  }
  return out;
}

absl::StatusOr<std::string> SqliteStore::ReadCheckpointChunk(int64_t run_id,
                                                             std::string_view sha256,
                                                             int64_t offset) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT data FROM checkpoint_chunks WHERE run_id = ? AND "
                                "sha256 = ? AND file_offset = ?"));
  s.Bind(1, run_id).Bind(2, sha256).Bind(3, offset);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, ": checkpoint ",
                                            std::string(sha256), " has no chunk at ", offset));
  }
  return s.ColumnBlob(0);
}

absl::Status SqliteStore::CommitCheckpoint(int64_t run_id, int attempt,
                                           std::string_view worker_id, std::string_view sha256,
                                           int64_t now_ms) {
  return Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const RunRecord run, GetRunLocked(run_id));
    RETURN_IF_ERROR(CheckLease(run, attempt, worker_id, now_ms));
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("UPDATE checkpoints SET complete = 1 WHERE run_id = ? AND "
                                    "sha256 = ?"));
      s.Bind(1, run_id).Bind(2, sha256);
      RETURN_IF_ERROR(s.Run());
      if (db_->Changes() == 0) {
        return absl::NotFoundError(absl::StrCat("run ", run_id, ": no checkpoint ",
                                                std::string(sha256), " was uploaded"));
      }
    }
    for (const char* table : {"checkpoint_chunks", "checkpoints"}) {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare(absl::StrCat("DELETE FROM ", table,
                                                 " WHERE run_id = ? AND sha256 != ?")));
      s.Bind(1, run_id).Bind(2, sha256);
      RETURN_IF_ERROR(s.Run());
    }
    return absl::OkStatus();
  });
}

absl::Status SqliteStore::DeleteCheckpoint(int64_t run_id, std::string_view sha256) {
  return Write([&]() -> absl::Status {
    for (const char* table : {"checkpoint_chunks", "checkpoints"}) {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare(absl::StrCat("DELETE FROM ", table,
                                                 " WHERE run_id = ? AND sha256 = ?")));
      s.Bind(1, run_id).Bind(2, sha256);
      RETURN_IF_ERROR(s.Run());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<CheckpointRecord>> SqliteStore::GetCheckpoint(int64_t run_id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT sha256, attempt, step, device_class, total_bytes "
                                "FROM checkpoints WHERE run_id = ? AND complete = 1"));
  s.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return std::optional<CheckpointRecord>();
  return std::optional<CheckpointRecord>(CheckpointRecord{
      .run_id = run_id, .sha256 = s.ColumnText(0), .attempt = static_cast<int>(s.ColumnInt(1)),
      .step = s.ColumnInt(2), .device_class = s.ColumnText(3), .total_bytes = s.ColumnInt(4),
      .complete = true});
}

absl::StatusOr<int> SqliteStore::DeleteCheckpoints(int64_t run_id) {
  int deleted = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    for (const char* table : {"checkpoint_chunks", "checkpoints"}) {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare(absl::StrCat("DELETE FROM ", table, " WHERE run_id = ?")));
      s.Bind(1, run_id);
      RETURN_IF_ERROR(s.Run());
      deleted = static_cast<int>(db_->Changes());
    }
    return absl::OkStatus();
  }));
  return deleted;
}

absl::StatusOr<int> SqliteStore::DeleteFinishedRunsCheckpoints() {
  constexpr const char* kFinished =
      "run_id IN (SELECT id FROM runs WHERE status NOT IN ('queued', 'leased'))";
  {
    // The reaper calls this every round: a read first, so that a round with
    // nothing to delete costs no write (and no fsync).
    absl::MutexLock lock(&db_mu_);
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare(absl::StrCat("SELECT 1 FROM checkpoints WHERE ", kFinished,
                                               " LIMIT 1")));
    ASSIGN_OR_RETURN(bool any, s.Step());
    if (!any) return 0;
  }
  int deleted = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    for (const char* table : {"checkpoint_chunks", "checkpoints"}) {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare(absl::StrCat("DELETE FROM ", table, " WHERE ", kFinished)));
      RETURN_IF_ERROR(s.Run());
      deleted = static_cast<int>(db_->Changes());
    }
    return absl::OkStatus();
  }));
  return deleted;
}

absl::StatusOr<int> SqliteStore::DeleteIncompleteCheckpoints() {
  int dropped = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("DELETE FROM checkpoint_chunks WHERE (run_id, sha256) IN "
                                    "(SELECT run_id, sha256 FROM checkpoints "
                                    "WHERE complete = 0)"));
      RETURN_IF_ERROR(s.Run());
    }
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("DELETE FROM checkpoints WHERE complete = 0"));
    RETURN_IF_ERROR(s.Run());
    dropped = static_cast<int>(db_->Changes());
    return absl::OkStatus();
  }));
  return dropped;
}

absl::StatusOr<CheckpointUsage> SqliteStore::GetCheckpointUsage() {
  absl::MutexLock lock(&db_mu_);
  CheckpointUsage usage;
  {
    ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare("SELECT count(*) FROM checkpoints"));
    ASSIGN_OR_RETURN(bool found, s.Step());
    if (found) usage.count = static_cast<int>(s.ColumnInt(0));
  }
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT coalesce(sum(length(data)), 0) FROM checkpoint_chunks"));
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (found) usage.bytes = s.ColumnInt(0);
  return usage;
}

}  // namespace smallem
