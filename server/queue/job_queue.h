// JobQueue: the coordinator's queue policy on top of SqliteStore — lease
// durations, the retry policy by failure class, the reaper that requeues
// expired leases, and the run spec a worker receives.
//
// Leases. A lease is (run, attempt, worker, expiry); every heartbeat pushes
// the expiry lease_duration_ms past now. A worker's Heartbeat, Complete and
// Fail carry the attempt they were leased under: a superseded or expired
// attempt gets FailedPrecondition (the worker must stop that child); a
// repeated Complete or Fail whose first reply was lost succeeds again
// without effect. Runs execute at least once and are recorded exactly once.
//
// Retry policy. engine_error: requeued while engine_failures <= the run's
// retry budget, then failed. lease_lost (expiry, worker death, drain): not
// charged to that budget; requeued until max_lease_losses. invalid_config
// (also out of memory): failed at once — the same spec would fail again.
// A release (the worker hands the run back as it stops: a scheduler's
// SIGTERM) is no failure: requeued at once, charged to nothing.
//
// Change notification. Every write that can change what a client sees of a
// run (lease, heartbeat, completion, failure, reaping, cancel, retry,
// deletion) bumps a counter; a streaming reader waits on it (WaitForChange)
// instead of polling the store.
//
// Checkpoints (docs/reliability.md). A run's checkpoint is deleted when its
// result is recorded; each reaper round also deletes those of runs that
// ended otherwise (failed, cancelled, or a crash between the two).
//
// Thread-safe. Time comes from the injected Clock; the reaper thread (when
// started) wakes every reap_interval_ms of real time.
#ifndef SMALLEM_SERVER_QUEUE_JOB_QUEUE_H_
#define SMALLEM_SERVER_QUEUE_JOB_QUEUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "server/store/sqlite_store.h"

namespace smallem {

struct JobQueueOptions {
  int64_t lease_duration_ms = 30'000;     // a lease outlives each heartbeat by this much
  int64_t heartbeat_interval_ms = 2'000;  // what workers are told to use
  int max_lease_losses = 5;               // lost leases before a run is failed
  int default_retry_budget = 2;           // engine errors retried per run
  // Runs one submission may queue: a small grid file (1,000 lr values ×
  // 500 seeds) must not queue half a million runs.
  int64_t max_runs_per_submission = 100'000;
  int64_t reap_interval_ms = 1'000;       // reaper period (real time)
};

// A run handed to a worker.
struct Lease {
  int64_t run_id = 0;
  int attempt = 0;
  std::string spec_json;     // complete run spec; "data" is dataset_hash
  std::string dataset_hash;
  int64_t expires_unix_ms = 0;
  // The run's last checkpoint (of the leasing device's class) to resume
  // from; nullopt: start from the beginning.
  std::optional<CheckpointRecord> checkpoint;
};

class JobQueue {
 public:
  // `store` and `clock` must outlive the queue.
  JobQueue(SqliteStore* store, const Clock* clock, JobQueueOptions options);
  ~JobQueue();  // stops the reaper

  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  const JobQueueOptions& options() const { return options_; }
  const Clock* clock() const { return clock_; }

  // The oldest queued run, leased to (worker, device); nullopt when none.
  // A run with a checkpoint is leased only to a device of the checkpoint's
  // class, and the lease names it.
  absl::StatusOr<std::optional<Lease>> LeaseRun(std::string_view worker_id,
                                                std::string_view device,
                                                std::string_view device_class);
  // See SqliteStore::Heartbeat; the new expiry is now + lease_duration_ms.
  absl::StatusOr<HeartbeatOutcome> Heartbeat(int64_t run_id, int attempt,
                                             std::string_view worker_id,
                                             const std::vector<ProgressRecord>& points);
  // See SqliteStore::Complete; then deletes the run's checkpoints. Returns
  // true for a duplicate.
  absl::StatusOr<bool> Complete(int64_t run_id, int attempt, std::string_view worker_id,
                                std::string_view result_json,
                                const std::vector<ProgressRecord>& points);
  // Records a failed attempt; returns whether the run went back to the queue.
  // A kDiverged failure ends the run as kDiverged (never requeued) with
  // `divergence`. InvalidArgument for FailureClass::kNone, or a divergence
  // without a step.
  absl::StatusOr<bool> Fail(int64_t run_id, int attempt, std::string_view worker_id,
                            FailureClass failure, std::string_view message,
                            const DivergenceRecord& divergence = {});

  // Hands (run, attempt) back to the queue at once, charging it to no
  // counter; see SqliteStore::Release. Idempotent.
  absl::Status Release(int64_t run_id, int attempt, std::string_view worker_id,
                       std::string_view reason);

  // Requeues (or fails) every run whose lease expired. Returns how many.
  absl::StatusOr<int> ReapExpiredLeases();

  absl::StatusOr<int> Cancel(const RunSelector& selector);
  absl::StatusOr<int> Retry(const RunSelector& selector);
  // SqliteStore::DeleteExperiment, as a change (pages and streams look again).
  absl::StatusOr<DeletedExperiment> DeleteExperiment(int64_t experiment_id, bool force);

  // Starts / stops the background reaper. Stop is idempotent.
  void StartReaper();
  void StopReaper();

  // The change counter (see the file comment); starts at 0.
  uint64_t changes() const;
  // Waits until changes() differs from `seen` or `timeout` passes (real
  // time); returns whether it changed.
  bool WaitForChange(uint64_t seen, absl::Duration timeout) const;

  // The retry policy: where a run whose attempt just failed goes next.
  static RunStatus NextStatus(const RunRecord& run, const JobQueueOptions& options);

 private:
  void ReaperLoop();
  void NoteChange();
  // `result`, after NoteChange() when it is ok.
  template <typename T>
  T Changed(T result);

  SqliteStore* const store_;
  const Clock* const clock_;
  const JobQueueOptions options_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
  mutable absl::Mutex changes_mu_;
  uint64_t changes_ ABSL_GUARDED_BY(changes_mu_) = 0;
};

// The complete run spec of a cell: the variant's canonical spec plus data
// (the dataset's content hash), seed and budget. InvalidArgument when the
// variant spec is not a JSON object.
absl::StatusOr<std::string> ComposeRunSpec(const RunRecord& run, std::string_view dataset_hash);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_JOB_QUEUE_H_
