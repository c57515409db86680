// SqliteStore: everything the coordinator remembers — experiments, variants,
// runs and their attempts, metric points, results, workers and datasets — in
// one SQLite file that the coordinator alone owns.
//
// Durability: every method that writes does so in one BEGIN IMMEDIATE
// transaction, committed with synchronous=FULL before it returns OK, so what
// a caller acknowledges survives a crash. Open applies pending migrations.
//
// Leases: the store enforces the lease invariant inside each transaction —
// a write from a worker names (run, attempt, worker) and is accepted only
// while that attempt holds an unexpired lease; a repeated write that already
// took effect is accepted again as a no-op (see each method). What happens
// after a failure (requeue or fail) is the caller's policy, passed in as a
// DecideFn and applied within the same transaction.
//
// Group commit: concurrent writers are batched, LevelDB style — the first
// waiting writer runs every queued write in one transaction (each under its
// own SAVEPOINT, so one write's error undoes only that write) and one fsync,
// then wakes the others. A write's outcome is reported only after its batch
// commits.
//
// One owner: Open takes the file's StoreLock for the store's lifetime, so a
// second coordinator (or `smallemctl run`) on the same file is refused;
// OpenReadOnly takes none, so readers may come and go beside the owner.
//
// Thread-safe: one connection guarded by db_mu_; writers queue on queue_mu_.
#ifndef SMALLEM_SERVER_STORE_SQLITE_STORE_H_
#define SMALLEM_SERVER_STORE_SQLITE_STORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/store/sqlite.h"
#include "server/store/store_lock.h"
#include "server/store/store_types.h"

namespace smallem {

// The end of the NotFound message for an experiment that does not exist:
// the command that lists every experiment, those hidden by default (every
// run cancelled) included. smallemctl's --db FILE verbs give the same
// command with their --db (cli/session.h).
inline constexpr char kListExperimentsHint[] = "`smallemctl status --all` lists them all";

// Given a run whose attempt just ended without a result (counters already
// updated for this ending), the status it moves to: kQueued or kFailed, or
// kDiverged for a kDiverged failure.
using DecideFn = absl::FunctionRef<RunStatus(const RunRecord&)>;

// Which runs a Cancel or Retry applies to: one experiment's, or a list.
struct RunSelector {
  int64_t experiment_id = 0;   // > 0: every run of this experiment
  std::vector<int64_t> run_ids;  // otherwise these
};

struct HeartbeatOutcome {
  int64_t lease_expires_unix_ms = 0;
  bool cancel = false;  // the run was cancelled while this attempt held it
};

// What an operator watches (/metrics): totals over the whole database and
// the commit latency since Open.
struct StoreStats {
  RunCountsRecord runs;        // every run, by status
  int64_t attempts = 0;        // leases ever granted (one attempt each)
  int64_t leases_lost = 0;     // attempts that ended with their lease lost (expired)
  int64_t datasets = 0;        // complete datasets
  int64_t dataset_bytes = 0;   // their total size
  int64_t commits = 0;         // write transactions committed since Open
  double commit_seconds_sum = 0;
};

// What SqliteStore::DeleteExperiment removed.
struct DeletedExperiment {
  std::string name;
  int leased = 0;             // of its runs, leased when it went (only with force)
  int runs = 0;
  int results = 0;
  int64_t metric_points = 0;
  int checkpoints = 0;
};

struct DatasetChunkRef {
  std::string file_name;
  int64_t file_size = 0;
  int64_t offset = 0;
  int64_t length = 0;
};

// A run's checkpoint (docs/reliability.md): what the coordinator knows of
// it; its bytes are chunks.
struct CheckpointRecord {
  int64_t run_id = 0;
  std::string sha256;        // of the whole file, lower-case hex
  int attempt = 0;           // the attempt that wrote it
  int64_t step = 0;          // optimizer steps it holds
  std::string device_class;  // of the device that trained it
  int64_t total_bytes = 0;
  bool complete = false;
};

// Checkpoints stored, complete or being uploaded, and their bytes.
struct CheckpointUsage {
  int count = 0;
  int64_t bytes = 0;
};

// How SqliteStore::BackupTo copies.
struct BackupOptions {
  int pages_per_step = 256;  // per hold of the store's lock: 1 MiB of 4 KiB pages
  // Called between steps, without the lock, with the pages still to copy
  // and in all; an error ends the backup with it (a deadline passed, the
  // client left). Empty: none.
  std::function<absl::Status(int remaining_pages, int total_pages)> between_steps;
};

class SqliteStore {
 public:
  // Opens or creates the database at `path` as its one owner (StoreLock)
  // and migrates it to the newest schema. Unavailable naming the file when
  // another owner holds it; errors from SqliteDb::Open and ApplyMigrations.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  // Opens the existing database at `path` for reading only, beside the
  // coordinator that owns it or with none (`smallemctl report --db FILE`):
  // nothing is migrated or created, and every write method fails with
  // PermissionDenied. NotFound when there is no such file;
  // FailedPrecondition when its schema is not this binary's (older: a
  // coordinator of this version migrates it when it opens it; newer: a newer
  // smallemctl reads it).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> OpenReadOnly(const std::string& path);

  // ---- Experiments -------------------------------------------------------

  // Records a grid submission: creates the experiment (or updates the one of
  // the same name), adds new cells as queued runs, requeues failed and
  // cancelled cells with a fresh retry budget and leaves the others alone.
  // FailedPrecondition when the experiment exists with another dataset.
  // Cells are written in batches of a few hundred, each its own transaction,
  // so other writers never wait long; after a failure between batches, the
  // same submission again completes it (cells are never queued twice).
  absl::StatusOr<SubmitOutcome> Submit(const SubmissionRecord& submission, int64_t now_ms);

  // NotFound when absent, its message ending with kListExperimentsHint.
  absl::StatusOr<ExperimentRecord> GetExperiment(int64_t id);
  absl::StatusOr<ExperimentRecord> FindExperiment(std::string_view name);
  // Newest first.
  absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(int limit);
  absl::StatusOr<RunCountsRecord> CountRuns(int64_t experiment_id);

  // Deletes experiment `id` and everything recorded of it — its runs, their
  // attempts, metric points, results and checkpoints, its variants — in one
  // transaction, its look decisions too (its dataset stays: other
  // experiments may share it).
  // FailedPrecondition, deleting nothing, while any of its runs is leased,
  // unless `force` (the workers holding them learn at their next heartbeat
  // that the run is gone, and stop). NotFound when absent.
  absl::StatusOr<DeletedExperiment> DeleteExperiment(int64_t id, bool force);

  // ---- Runs (reads) ------------------------------------------------------

  absl::StatusOr<RunRecord> GetRun(int64_t run_id);  // NotFound when absent
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int64_t experiment_id);  // id order
  absl::StatusOr<std::vector<RunRecord>> ListRunsWithStatus(RunStatus status);
  absl::StatusOr<std::optional<ResultRecord>> GetResult(int64_t run_id);
  absl::StatusOr<std::vector<ResultRecord>> ListResults(int64_t experiment_id);
  absl::StatusOr<std::vector<AttemptRecord>> ListAttempts(int64_t run_id);
  // Points of one attempt with step > after_step, in step order.
  absl::StatusOr<std::vector<MetricPointRecord>> ListMetricPoints(int64_t run_id, int attempt,
                                                                  int64_t after_step);

  // ---- Queue transitions -------------------------------------------------

  // Leases the oldest queued run to (worker, device): status leased, attempt
  // + 1, expiry `expires_ms`, a new attempts row. nullopt when none is queued.
  absl::StatusOr<std::optional<LeaseRecord>> LeaseNextRun(std::string_view worker_id,
                                                          std::string_view device,
                                                          std::string_view device_class,
                                                          int64_t now_ms, int64_t expires_ms);

  // Extends the lease of (run, attempt, worker) to `expires_ms` and records
  // `points` (a point already recorded is ignored); the last point becomes
  // the run's progress. On a run cancelled during this attempt, records
  // nothing and answers cancel. FailedPrecondition when the attempt no longer
  // holds the lease (superseded, expired, another worker); NotFound for an
  // unknown run.
  absl::StatusOr<HeartbeatOutcome> Heartbeat(int64_t run_id, int attempt,
                                             std::string_view worker_id,
                                             const std::vector<ProgressRecord>& points,
                                             int64_t now_ms, int64_t expires_ms);

  // Records the result of (run, attempt) and marks the run succeeded.
  // Returns true (duplicate) when this attempt's result was already recorded
  // by this worker with this same result_json — nothing changes.
  // FailedPrecondition as for Heartbeat, or when the run has another
  // attempt's result, this attempt's result from another worker or with
  // another result, or was cancelled.
  absl::StatusOr<bool> Complete(int64_t run_id, int attempt, std::string_view worker_id,
                                std::string_view result_json,
                                const std::vector<ProgressRecord>& points, int64_t now_ms);

  // Ends (run, attempt) with a failure of class `failure` (not kNone): bumps
  // the counter it is charged to (engine_failures for engine errors,
  // lease_losses for lease losses, neither for invalid configs or
  // divergence), then moves the run to decide(run). A kDiverged failure
  // records `divergence` (diverged_step, last_finite_loss). A repeat of a
  // failure already recorded for this attempt returns the run unchanged.
  // Returns the run as it is afterwards.
  absl::StatusOr<RunRecord> Fail(int64_t run_id, int attempt, std::string_view worker_id,
                                 FailureClass failure, std::string_view message,
                                 int64_t now_ms, DecideFn decide,
                                 const DivergenceRecord& divergence = {});

  // Hands (run, attempt) back: the run is queued again at once, charged to
  // no counter (neither engine_failures nor lease_losses), and the attempt
  // ends as "released" with `reason` as its message. A repeat of a release
  // already recorded for this attempt returns the run unchanged.
  // FailedPrecondition as for Heartbeat; NotFound for an unknown run.
  // Returns the run as it is afterwards.
  absl::StatusOr<RunRecord> Release(int64_t run_id, int attempt, std::string_view worker_id,
                                    std::string_view reason, int64_t now_ms);

  // Ends every lease that expired before now_ms as a lost lease
  // (lease_losses + 1, status decide(run)). Returns the runs afterwards.
  absl::StatusOr<std::vector<RunRecord>> ReapExpiredLeases(int64_t now_ms, DecideFn decide);

  // Moves the selected queued and leased runs to cancelled (a leased run's
  // worker learns it at its next heartbeat). Returns how many changed.
  absl::StatusOr<int> Cancel(const RunSelector& selector, int64_t now_ms);
  // Moves the selected failed and cancelled runs back to queued with their
  // counters reset. Returns how many changed.
  absl::StatusOr<int> Retry(const RunSelector& selector, int64_t now_ms);

  // ---- Backup ------------------------------------------------------------

  // Writes a consistent, checked copy of the whole database to a new file at
  // `path`, mode 0600 (SqliteBackup), options.pages_per_step pages per hold
  // of the lock: other calls go on between steps, and what they write
  // reaches the copy. Errors of SqliteBackup (AlreadyExists when `path`
  // exists) or of options.between_steps; after an error no file is left at
  // `path`.
  absl::Status BackupTo(const std::string& path, const BackupOptions& options = {});
  // The database's size (pages × page size): about what a backup writes.
  absl::StatusOr<int64_t> DatabaseBytes();
  // The database file's path.
  std::string path();

  // ---- Workers -----------------------------------------------------------

  // Inserts or replaces a worker (registered_unix_ms kept on replace).
  absl::Status UpsertWorker(const WorkerRecord& worker);
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers();

  // ---- Operations (sqlite_store_stats.cc) --------------------------------

  absl::StatusOr<StoreStats> Stats();

  // ---- Datasets (sqlite_store_datasets.cc) --------------------------------

  // Total bytes of the complete dataset with this hash; nullopt when absent
  // or incomplete.
  absl::StatusOr<std::optional<int64_t>> DatasetBytes(std::string_view content_hash);
  // Stores one chunk of one file of an incomplete dataset (creating it).
  // A stored chunk is never replaced: the same bytes again are a no-op;
  // different bytes (or a different file size) at the same place are
  // FailedPrecondition. FailedPrecondition too when the dataset is already
  // complete.
  absl::Status PutDatasetChunk(std::string_view content_hash, const DatasetChunkRef& where,
                               std::string_view data, int64_t now_ms);
  // Chunks of a dataset in (file, offset) order (complete or not).
  absl::StatusOr<std::vector<DatasetChunkRef>> ListDatasetChunks(std::string_view content_hash);
  // NotFound when absent.
  absl::StatusOr<std::string> ReadDatasetChunk(std::string_view content_hash,
                                               std::string_view file_name, int64_t offset);
  // How many times incomplete datasets were dropped so far (in this
  // process): read before listing the chunks to verify, and passed to
  // CompleteDataset.
  int64_t DatasetDrops();
  // Marks a dataset complete, in one transaction with a check that its
  // chunks are exactly `verified` (what the caller read and checked) and
  // that no incomplete dataset was dropped since `drops_before` (the
  // caller's DatasetDrops() before it listed them). Chunks are never
  // replaced, only added or dropped whole: the same list with no drop in
  // between means the same bytes, so no upload can swap a file between the
  // check and the completion — not even by having the dataset dropped and
  // sent again with other bytes of the same sizes. Aborted when anything
  // changed (the caller sends it again); NotFound when nothing was uploaded.
  // Already complete: OK.
  absl::Status CompleteDataset(std::string_view content_hash,
                               const std::vector<DatasetChunkRef>& verified,
                               int64_t drops_before);
  // Drops an incomplete dataset's chunks (a failed upload).
  absl::Status DeleteIncompleteDataset(std::string_view content_hash);
  // Drops every incomplete dataset — uploads that a stopped coordinator
  // never finished. Only when no upload is under way (at startup). Returns
  // how many were dropped.
  absl::StatusOr<int> DeleteIncompleteDatasets();

  // ---- Checkpoints (sqlite_store_checkpoints.cc) ---------------------------
  // A run keeps one complete checkpoint at most, plus the one being
  // uploaded; writes come from the attempt holding the run's lease.

  // Stores one chunk of the checkpoint `c` names (run, sha256; attempt,
  // step and total_bytes on its first chunk), written by (c.run_id,
  // c.attempt, worker_id), which must hold the run's unexpired lease
  // (CheckLease: FailedPrecondition otherwise). The checkpoint's
  // device_class is the lease's. A chunk written again replaces itself;
  // nothing is written when that checkpoint is already complete.
  absl::Status PutCheckpointChunk(const CheckpointRecord& c, std::string_view worker_id,
                                  int64_t offset, std::string_view data, int64_t now_ms);
  // Offsets and lengths of a checkpoint's chunks, in offset order.
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> ListCheckpointChunks(
      int64_t run_id, std::string_view sha256);
  // NotFound when absent.
  absl::StatusOr<std::string> ReadCheckpointChunk(int64_t run_id, std::string_view sha256,
                                                  int64_t offset);
  // Makes the uploaded checkpoint `sha256` (its chunks checked by the
  // caller) the run's one: marks it complete and deletes every other
  // checkpoint of the run, under the writer's lease as for
  // PutCheckpointChunk. NotFound when no such upload exists.
  absl::Status CommitCheckpoint(int64_t run_id, int attempt, std::string_view worker_id,
                                std::string_view sha256, int64_t now_ms);
  // Drops one checkpoint of a run, complete or not (a bad upload).
  absl::Status DeleteCheckpoint(int64_t run_id, std::string_view sha256);
  // The run's complete checkpoint; nullopt when it has none.
  absl::StatusOr<std::optional<CheckpointRecord>> GetCheckpoint(int64_t run_id);
  // Deletes every checkpoint of the run. Returns how many went.
  absl::StatusOr<int> DeleteCheckpoints(int64_t run_id);
  // Deletes the checkpoints of every run that is neither queued nor leased
  // (its result recorded, failed for good, cancelled). Returns how many.
  absl::StatusOr<int> DeleteFinishedRunsCheckpoints();
  // Drops every incomplete checkpoint — uploads that a stopped coordinator
  // never finished. Only when no upload is under way (at startup). Returns
  // how many were dropped.
  absl::StatusOr<int> DeleteIncompleteCheckpoints();
  absl::StatusOr<CheckpointUsage> GetCheckpointUsage();

  // ---- Sequential seeds (sqlite_store_looks.cc) ----------------------------
  // The looks of an experiment with sequential seeds are decided by a
  // LookPlanner (server/queue/sequential_looks.h: PlanLooks) from what the
  // store holds, and its plan — the decisions and the runs they queue — is
  // written in the transaction that read it: a look is decided once, its
  // runs are queued once, and a crash before the commit leaves neither.

  // Decides from `inputs` (read in the calling transaction) at now_ms.
  using LookPlanner = std::function<absl::StatusOr<LookPlan>(const LookInputs&, int64_t)>;
  // The planner that Complete (and a Fail that ends a run diverged) runs in
  // its own transaction, after the result: one SAVEPOINT, so a planner's or
  // plan's error undoes the decision only, never the result (logged; the
  // next DecideLooks completes it). None by default (nothing is decided).
  // REQUIRES: called before any other thread uses the store.
  void SetLookPlanner(LookPlanner planner);
  // Runs the planner on experiment `experiment_id` in one transaction and
  // writes its plan; returns it (empty without a planner). NotFound for an
  // unknown experiment; the plan's errors (FailedPrecondition for a cell of
  // a variant the experiment does not have, AlreadyExists for a decision
  // already recorded) roll the whole plan back.
  absl::StatusOr<LookPlan> DecideLooks(int64_t experiment_id, int64_t now_ms);
  // The decisions recorded for an experiment, in (variant, look) order.
  absl::StatusOr<std::vector<LookDecisionRecord>> ListLookDecisions(int64_t experiment_id);

 private:
  struct Writer;

  SqliteStore(std::unique_ptr<SqliteDb> db, std::optional<StoreLock> lock)
      : lock_(std::move(lock)), db_(std::move(db)) {}

  // Runs `op` inside a write transaction, batched with concurrent writes.
  // Returns op's error (its changes rolled back) or the commit's.
  absl::Status Write(absl::FunctionRef<absl::Status()> op) ABSL_LOCKS_EXCLUDED(queue_mu_, db_mu_);
  // Runs a batch of writers in one transaction; sets each one's status.
  void RunBatchLocked(const std::vector<Writer*>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);

  absl::StatusOr<RunRecord> GetRunLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // ListDatasetChunks. REQUIRES: db_mu_ held.
  absl::StatusOr<std::vector<DatasetChunkRef>> ListDatasetChunksLocked(
      std::string_view content_hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::StatusOr<std::vector<RunRecord>> QueryRunsLocked(std::string_view where, int64_t arg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::Status InsertPointsLocked(int64_t run_id, int attempt,
                                  const std::vector<ProgressRecord>& points, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::Status EndAttemptLocked(int64_t run_id, int attempt, std::string_view outcome,
                                std::string_view message, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::StatusOr<RunRecord> FailLocked(const RunRecord& run, FailureClass failure,
                                       std::string_view message, int64_t now_ms,
                                       DecideFn decide, const DivergenceRecord& divergence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::StatusOr<std::vector<int64_t>> SelectRunIdsLocked(const RunSelector& selector,
                                                          std::string_view statuses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Creates the experiment or updates its grid; sets out.experiment_id.
  absl::Status UpsertExperimentLocked(const SubmissionRecord& submission, int64_t now_ms,
                                      SubmitOutcome& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Queues cells [begin, end) of `submission` into out.experiment_id
  // (creating the experiment first when it is 0), counting them in `out`.
  absl::Status SubmitBatchLocked(const SubmissionRecord& submission, int64_t now_ms,
                                 size_t begin, size_t end, SubmitOutcome& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);

  // DecideLooks inside the calling write transaction.
  absl::StatusOr<LookPlan> DecideLooksLocked(int64_t experiment_id, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // DecideLooksLocked under SAVEPOINT look: its error is logged and undone
  // alone, the caller's writes stay.
  void MaybeDecideLooksLocked(int64_t experiment_id, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::StatusOr<std::vector<LookDecisionRecord>> ListLookDecisionsLocked(int64_t experiment_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);

  LookPlanner look_planner_;  // set before concurrent use; then read only

  absl::Mutex queue_mu_ ABSL_ACQUIRED_BEFORE(db_mu_);
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(queue_mu_);  // front = current leader

  // The owner's lock (none for a reader). Declared before db_, so that it
  // is released after the connection closes (StoreLock: closing its
  // descriptor first would drop SQLite's own locks).
  std::optional<StoreLock> lock_;
  absl::Mutex db_mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(db_mu_);

  // Committed write transactions and their total commit time (Stats).
  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> commit_nanos_{0};
  // Counts DeleteIncompleteDataset(s) calls (see CompleteDataset).
  int64_t dataset_drops_ ABSL_GUARDED_BY(db_mu_) = 0;
};

// OK when (run, attempt, worker) holds an unexpired lease at now_ms;
// otherwise FailedPrecondition saying why (superseded, not yet handed out,
// never leased, expired, cancelled, finished, another worker's). Exposed for tests.
absl::Status CheckLease(const RunRecord& run, int attempt, std::string_view worker_id,
                        int64_t now_ms);

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_SQLITE_STORE_H_
