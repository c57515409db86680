// SqliteStore: opening, group commit, experiments and submissions, workers.
// Run reads are in sqlite_store_reads.cc, queue transitions in
// sqlite_store_queue.cc, datasets in sqlite_store_datasets.cc.
#include "server/store/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_store_rows.h"

namespace smallem {

const char* RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kQueued: return "queued";
    case RunStatus::kLeased: return "leased";
    case RunStatus::kSucceeded: return "succeeded";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kCancelled: return "cancelled";
    case RunStatus::kDiverged: return "diverged";
  }
  return "?";
}

absl::StatusOr<RunStatus> ParseRunStatus(std::string_view name) {
  for (RunStatus s : {RunStatus::kQueued, RunStatus::kLeased, RunStatus::kSucceeded,
                      RunStatus::kFailed, RunStatus::kCancelled, RunStatus::kDiverged}) {
    if (name == RunStatusName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown run status \"", std::string(name), "\" (expected queued, leased, succeeded, failed, cancelled or diverged)"));
}

const char* FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kNone: return "";
    case FailureClass::kLeaseLost: return "lease_lost";
    case FailureClass::kEngineError: return "engine_error";
    case FailureClass::kInvalidConfig: return "invalid_config";
    case FailureClass::kDiverged: return "diverged";
  }
  return "";
}

FailureClass ParseFailureClass(std::string_view name) {
  for (FailureClass c : {FailureClass::kLeaseLost, FailureClass::kEngineError,
                         FailureClass::kInvalidConfig, FailureClass::kDiverged}) {
    if (name == FailureClassName(c)) return c;
  }
  return FailureClass::kNone;
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  // Locked before SQLite opens it: a second owner must not migrate it.
  absl::StatusOr<StoreLock> lock = StoreLock::Acquire(path);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
  if (!db.ok()) return db.status();
  if (absl::Status s = ApplyMigrations(**db, EmbeddedMigrations()); !s.ok()) return s;
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(*db), *std::move(lock)));
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::OpenReadOnly(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(path);
  if (!db.ok()) return db.status();
  absl::StatusOr<int> version = SchemaVersion(**db);
  if (!version.ok()) return version.status();
  const int newest = static_cast<int>(EmbeddedMigrations().size());
  if (*version < newest) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has schema version ", *version, ", older than this binary's ", newest,
        "; a reader does not migrate it: `smallem-coordinator --db ", path,
        "` does when it opens it"));
  }
  if (*version > newest) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has schema version ", *version, " but this binary knows only up to ", newest,
        "; read it with a newer smallemctl"));
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(*db), std::nullopt));
}

// ---- Group commit -------------------------------------------------------------

struct SqliteStore::Writer {
  explicit Writer(absl::FunctionRef<absl::Status()> f) : op(f) {}
  absl::FunctionRef<absl::Status()> op;
  absl::Status status;
  bool done = false;
};

absl::Status SqliteStore::Write(absl::FunctionRef<absl::Status()> op) {
  // Enough to amortize one fsync over every worker of a busy coordinator,
  // few enough that one batch's latency stays small.
  constexpr size_t kMaxBatch = 256;
  Writer self(op);
  queue_mu_.Lock();
  writers_.push_back(&self);
  auto done_or_leader = [this, &self]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return self.done || writers_.front() == &self;
  };
  queue_mu_.Await(absl::Condition(&done_or_leader));
  if (self.done) {
    queue_mu_.Unlock();
    return self.status;
  }
  // The leader: take the queue's head (itself first) as one batch. Writers
  // arriving meanwhile queue behind it and the next leader takes them.
  std::vector<Writer*> batch(writers_.begin(),
                             writers_.begin() + std::min(writers_.size(), kMaxBatch));
  queue_mu_.Unlock();
  {
    absl::MutexLock db_lock(&db_mu_);
    RunBatchLocked(batch);
  }
  queue_mu_.Lock();
  for (Writer* w : batch) {
    CHECK(writers_.front() == w) << "group commit queue out of order";
    writers_.pop_front();
    w->done = true;
  }
  queue_mu_.Unlock();
  return self.status;
}

void SqliteStore::RunBatchLocked(const std::vector<Writer*>& batch) {
  absl::StatusOr<SqliteTransaction> txn = SqliteTransaction::Begin(*db_);
  if (!txn.ok()) {
    for (Writer* w : batch) w->status = txn.status();
    return;
  }
  auto exec = [this](std::string_view sql) -> absl::Status {
    ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare(sql));
    return s.Run();
  };
  for (Writer* w : batch) {
    absl::Status status = exec("SAVEPOINT write");
    if (status.ok()) {
      status = w->op();
      // A failed write leaves nothing behind; the batch goes on.
      if (!status.ok()) exec("ROLLBACK TO write").IgnoreError();
      absl::Status released = exec("RELEASE write");
      if (status.ok()) status = released;
    }
    w->status = status;
  }
  const auto commit_start = std::chrono::steady_clock::now();
  absl::Status committed = txn->Commit();
  commits_.fetch_add(1, std::memory_order_relaxed);
  commit_nanos_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - commit_start)
                              .count(),
                          std::memory_order_relaxed);
  if (!committed.ok()) {
    for (Writer* w : batch) {
      if (w->status.ok()) w->status = committed;
    }
  }
}

// ---- Experiments ------------------------------------------------------------

namespace {

constexpr std::string_view kExperimentColumns =
    "id, name, baseline, grid_file, grid_yaml, dataset_hash, created_unix_ms, updated_unix_ms, "
    "seed_schedule";

ExperimentRecord ReadExperiment(const SqliteStatement& s) {
  return ExperimentRecord{.id = s.ColumnInt(0), .name = s.ColumnText(1),
                          .baseline = s.ColumnText(2), .grid_file = s.ColumnText(3),
                          .grid_yaml = s.ColumnText(4), .dataset_hash = s.ColumnText(5),
                          .seed_schedule = s.ColumnText(8), .created_unix_ms = s.ColumnInt(6),
                          .updated_unix_ms = s.ColumnInt(7)};
}

// Cells queued per write transaction: a few milliseconds of inserts, so a
// submission never holds the database for long.
constexpr size_t kSubmitBatchCells = 500;

void BindOptionalBudget(SqliteStatement& s, int index, const CellRecord& cell) {
  if (cell.budget_steps) s.Bind(index, *cell.budget_steps); else s.BindNull(index);
  if (cell.budget_minutes) s.Bind(index + 1, *cell.budget_minutes); else s.BindNull(index + 1);
}

}  // namespace

absl::Status SqliteStore::UpsertExperimentLocked(const SubmissionRecord& sub, int64_t now_ms,
                                                 SubmitOutcome& out) {
  SqliteDb& db = *db_;
  {
    ASSIGN_OR_RETURN(SqliteStatement find,
                     db.Prepare("SELECT id, dataset_hash FROM experiments WHERE name = ?"));
    find.Bind(1, sub.name);
    ASSIGN_OR_RETURN(bool found, find.Step());
    if (found) {
      out.experiment_id = find.ColumnInt(0);
      if (find.ColumnText(1) != sub.dataset_hash) {
        return absl::FailedPreconditionError(absl::StrCat(
            "experiment \"", sub.name, "\" was submitted with dataset ", find.ColumnText(1),
            " and this grid names dataset ", sub.dataset_hash,
            "; give the grid another name to start a new experiment"));
      }
    }
  }
  if (out.experiment_id != 0) {
    ASSIGN_OR_RETURN(SqliteStatement update,
                     db.Prepare("UPDATE experiments SET baseline = ?, grid_file = ?, "
                                "grid_yaml = ?, updated_unix_ms = ?, seed_schedule = ? "
                                "WHERE id = ?"));
    update.Bind(1, sub.baseline).Bind(2, sub.grid_file).Bind(3, sub.grid_yaml).Bind(4, now_ms)
        .Bind(5, sub.seed_schedule).Bind(6, out.experiment_id);
    RETURN_IF_ERROR(update.Run());
  } else {
    ASSIGN_OR_RETURN(SqliteStatement insert,
                     db.Prepare("INSERT INTO experiments (name, baseline, grid_file, grid_yaml, "
                                "dataset_hash, created_unix_ms, updated_unix_ms, seed_schedule) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.Bind(1, sub.name).Bind(2, sub.baseline).Bind(3, sub.grid_file)
        .Bind(4, sub.grid_yaml).Bind(5, sub.dataset_hash).Bind(6, now_ms).Bind(7, now_ms)
        .Bind(8, sub.seed_schedule);
    RETURN_IF_ERROR(insert.Run());
    out.experiment_id = db.LastInsertRowId();
  }
  return absl::OkStatus();
}

absl::StatusOr<SubmitOutcome> SqliteStore::Submit(const SubmissionRecord& sub, int64_t now_ms) {
  // Cells go in batches, one write transaction each, so that heartbeats and
  // leases wait behind at most one batch of a large submission. A submission
  // cut short between batches (a crash) is completed by submitting it again:
  // a cell is identified by (spec, seed, budget) and never queued twice.
  SubmitOutcome out;
  size_t begin = 0;
  do {
    const size_t end = std::min(sub.cells.size(), begin + kSubmitBatchCells);
    RETURN_IF_ERROR(Write([&]() -> absl::Status {
      return SubmitBatchLocked(sub, now_ms, begin, end, out);
    }));
    begin = end;
  } while (begin < sub.cells.size());
  return out;
}

absl::Status SqliteStore::SubmitBatchLocked(const SubmissionRecord& sub, int64_t now_ms,
                                            size_t begin, size_t end, SubmitOutcome& out) {
  SqliteDb& db = *db_;
  if (out.experiment_id == 0) RETURN_IF_ERROR(UpsertExperimentLocked(sub, now_ms, out));

  // Variant ids by (name, spec_hash), created on first use.
  std::map<std::pair<std::string, std::string>, int64_t> variant_ids;
  for (size_t i = begin; i < end; ++i) {
    const CellRecord& cell = sub.cells[i];
    auto key = std::make_pair(cell.variant, cell.spec_hash);
    auto it = variant_ids.find(key);
    if (it == variant_ids.end()) {
      {
        ASSIGN_OR_RETURN(SqliteStatement insert,
                         db.Prepare("INSERT OR IGNORE INTO variants (experiment_id, name, kind, "
                                    "spec_json, spec_hash) VALUES (?, ?, ?, ?, ?)"));
        insert.Bind(1, out.experiment_id).Bind(2, cell.variant).Bind(3, cell.variant_kind)
            .Bind(4, cell.spec_json).Bind(5, cell.spec_hash);
        RETURN_IF_ERROR(insert.Run());
      }
      ASSIGN_OR_RETURN(SqliteStatement find,
                       db.Prepare("SELECT id FROM variants WHERE experiment_id = ? AND "
                                  "name = ? AND spec_hash = ?"));
      find.Bind(1, out.experiment_id).Bind(2, cell.variant).Bind(3, cell.spec_hash);
      ASSIGN_OR_RETURN(bool found, find.Step());
      CHECK(found) << "variant vanished inside its transaction";
      it = variant_ids.emplace(key, find.ColumnInt(0)).first;
    }
    const int64_t variant_id = it->second;

    ++out.total;
    int64_t run_id = 0;
    std::string status;
    {
      ASSIGN_OR_RETURN(SqliteStatement find,
                       db.Prepare("SELECT id, status FROM runs WHERE experiment_id = ? AND "
                                  "spec_hash = ? AND seed = ? AND budget = ?"));
      find.Bind(1, out.experiment_id).Bind(2, cell.spec_hash).Bind(3, cell.seed)
          .Bind(4, cell.budget);
      ASSIGN_OR_RETURN(bool found, find.Step());
      if (found) {
        run_id = find.ColumnInt(0);
        status = find.ColumnText(1);
      }
    }
    if (run_id == 0) {
      ASSIGN_OR_RETURN(SqliteStatement insert,
                       db.Prepare("INSERT INTO runs (experiment_id, variant_id, spec_hash, seed, "
                                  "budget, budget_steps, budget_minutes, status, retry_budget, "
                                  "created_unix_ms, updated_unix_ms) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)"));
      insert.Bind(1, out.experiment_id).Bind(2, variant_id).Bind(3, cell.spec_hash)
          .Bind(4, cell.seed).Bind(5, cell.budget);
      BindOptionalBudget(insert, 6, cell);
      insert.Bind(8, sub.retry_budget).Bind(9, now_ms).Bind(10, now_ms);
      RETURN_IF_ERROR(insert.Run());
      ++out.added;
    } else if (status == "failed" || status == "cancelled") {
      ASSIGN_OR_RETURN(SqliteStatement requeue,
                       db.Prepare("UPDATE runs SET status = 'queued', engine_failures = 0, "
                                  "lease_losses = 0, retry_budget = ?, updated_unix_ms = ? "
                                  "WHERE id = ?"));
      requeue.Bind(1, sub.retry_budget).Bind(2, now_ms).Bind(3, run_id);
      RETURN_IF_ERROR(requeue.Run());
      ++out.reissued;
    } else {
      ++out.unchanged;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExperimentRecord> SqliteStore::GetExperiment(int64_t id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare(absl::StrCat("SELECT ", std::string(kExperimentColumns),
                                             " FROM experiments WHERE id = ?")));
  s.Bind(1, id);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no experiment with id ", id, " (", kListExperimentsHint, ")"));
  }
  return ReadExperiment(s);
}

absl::StatusOr<ExperimentRecord> SqliteStore::FindExperiment(std::string_view name) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare(absl::StrCat("SELECT ", std::string(kExperimentColumns),
                                             " FROM experiments WHERE name = ?")));
  s.Bind(1, name);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no experiment named \"", std::string(name), "\" (",
                                            kListExperimentsHint, ")"));
  }
  return ReadExperiment(s);
}

absl::StatusOr<std::vector<ExperimentRecord>> SqliteStore::ListExperiments(int limit) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare(absl::StrCat("SELECT ", std::string(kExperimentColumns),
                                             " FROM experiments ORDER BY id DESC LIMIT ?")));
  s.Bind(1, int64_t{limit});
  std::vector<ExperimentRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadExperiment(s));
  }
  return out;
}

absl::StatusOr<RunCountsRecord> SqliteStore::CountRuns(int64_t experiment_id) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT status, COUNT(*) FROM runs WHERE experiment_id = ? "
                                "GROUP BY status"));
  s.Bind(1, experiment_id);
  RunCountsRecord counts;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    const int n = static_cast<int>(s.ColumnInt(1));
    ASSIGN_OR_RETURN(RunStatus status, ParseRunStatus(s.ColumnText(0)));
    switch (status) {
      case RunStatus::kQueued: counts.queued = n; break;
      case RunStatus::kLeased: counts.leased = n; break;
      case RunStatus::kSucceeded: counts.succeeded = n; break;
      case RunStatus::kFailed: counts.failed = n; break;
      case RunStatus::kCancelled: counts.cancelled = n; break;
      case RunStatus::kDiverged: counts.diverged = n; break;
    }
    counts.total += n;
  }
  return counts;
}

// ---- Backup -----------------------------------------------------------------

absl::Status SqliteStore::BackupTo(const std::string& path, const BackupOptions& options) {
  std::unique_ptr<SqliteBackup> backup;
  {
    absl::MutexLock lock(&db_mu_);
    ASSIGN_OR_RETURN(backup, SqliteBackup::Start(*db_, path));
  }
  // The backup lets go of the store's connection whatever happens, under
  // the lock that guards it; the copy's file goes with it unless checked.
  absl::Cleanup end = [&] {
    absl::MutexLock lock(&db_mu_);
    backup->End().IgnoreError();
  };
  while (true) {
    int remaining = 0, total = 0;
    {
      absl::MutexLock lock(&db_mu_);
      ASSIGN_OR_RETURN(const bool done, backup->Step(options.pages_per_step));
      if (done) {
        std::move(end).Cancel();
        RETURN_IF_ERROR(backup->End());
        break;
      }
      remaining = backup->remaining_pages();
      total = backup->total_pages();
    }
    if (options.between_steps) RETURN_IF_ERROR(options.between_steps(remaining, total));
    // absl::Mutex does not hand over: a moment for the calls that waited
    // to take the lock before the next step does.
    absl::SleepFor(absl::Milliseconds(1));
  }
  return backup->Check();
}

absl::StatusOr<int64_t> SqliteStore::DatabaseBytes() {
  absl::MutexLock lock(&db_mu_);
  int64_t bytes = 1;
  for (const char* pragma : {"PRAGMA page_count", "PRAGMA page_size"}) {
    ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare(pragma));
    ASSIGN_OR_RETURN(const bool row, s.Step());
    if (!row) return absl::InternalError(absl::StrCat(pragma, " gave no row"));
    bytes *= s.ColumnInt(0);
  }
  return bytes;
}

std::string SqliteStore::path() {
  absl::MutexLock lock(&db_mu_);
  return db_->path();
}

// ---- Workers ----------------------------------------------------------------

absl::Status SqliteStore::UpsertWorker(const WorkerRecord& w) {
  return Write([&]() -> absl::Status {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT INTO workers (id, hostname, devices_json, "
                                  "registered_unix_ms, last_seen_unix_ms, slurm_job_id, "
                                  "slurm_node) VALUES (?, ?, ?, ?, ?, ?, ?) "
                                  "ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, "
                                  "devices_json = excluded.devices_json, "
                                  "last_seen_unix_ms = excluded.last_seen_unix_ms, "
                                  "slurm_job_id = excluded.slurm_job_id, "
                                  "slurm_node = excluded.slurm_node"));
    s.Bind(1, w.id).Bind(2, w.hostname).Bind(3, w.devices_json).Bind(4, w.registered_unix_ms)
        .Bind(5, w.last_seen_unix_ms).Bind(6, w.slurm_job_id).Bind(7, w.slurm_node);
    return s.Run();
  });
}

absl::StatusOr<std::vector<WorkerRecord>> SqliteStore::ListWorkers() {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT id, hostname, devices_json, registered_unix_ms, "
                                "last_seen_unix_ms, slurm_job_id, slurm_node FROM workers "
                                "ORDER BY id"));
  std::vector<WorkerRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(WorkerRecord{.id = s.ColumnText(0), .hostname = s.ColumnText(1),
                               .slurm_job_id = s.ColumnText(5),
                               .slurm_node = s.ColumnText(6),
                               .devices_json = s.ColumnText(2),
                               .registered_unix_ms = s.ColumnInt(3),
                               .last_seen_unix_ms = s.ColumnInt(4)});
  }
  return out;
}

}  // namespace smallem
