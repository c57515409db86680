// JobDirs: the directories jobs write under the worker's cache,
// CACHE/jobs/:
//   run-R-attempt-A/         one job's spec, result and weights while it runs
//   failed/run-R-attempt-A/  a failed job's, kept for debugging; only the
//                            newest max_kept_failed stay, the oldest go first
// A job whose result the coordinator recorded, or that was cancelled, leaves
// nothing behind. Datasets (CACHE/datasets/) are never touched here.
//
// Several daemons may share one cache (`smallemctl run` starts several): a
// job directory belongs to one attempt, and only failed/ is ever pruned, so
// no daemon removes another's running job. Each running job's directory
// holds a `.lock` file its daemon keeps flock(2)ed until the job ends; the
// kernel drops the lock when the daemon dies, however it dies, so at start
// a daemon can tell the directories of jobs whose daemon was killed from
// those of its siblings' running jobs (SweepAbandoned).
//
// Cleanup is best effort: a directory that cannot be removed or moved is
// logged and left where it is.
//
// Thread-safe.
#ifndef SMALLEM_WORKER_JOB_DIRS_H_
#define SMALLEM_WORKER_JOB_DIRS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace smallem {

class JobDirs {
 public:
  // max_kept_failed: how many failed jobs' directories stay (0: none).
  JobDirs(std::string cache_dir, int max_kept_failed);
  // Releases the locks of jobs still held (their directories stay).
  ~JobDirs();
  JobDirs(const JobDirs&) = delete;
  JobDirs& operator=(const JobDirs&) = delete;

  // Creates an empty directory for the attempt (a leftover of the same name
  // is removed first) and returns its path. Internal naming the path and the
  // reason when it cannot.
  absl::StatusOr<std::string> Create(int64_t run_id, int attempt);

  // Removes a finished job's directory `dir` (from Create).
  void Remove(const std::string& dir);

  // Moves the directories of jobs whose daemon died (their lock is free)
  // into failed/, within the cap, as KeepFailed does; a directory without a
  // lock (made before locks, or by a daemon killed while creating it) goes
  // too once it is older than `unlocked_grace`. Returns how many moved.
  int SweepAbandoned(absl::Duration unlocked_grace = absl::Minutes(10));

  // Moves a failed job's directory `dir` (from Create) into failed/, then
  // removes the oldest there beyond max_kept_failed. Returns where it now
  // is: its path under failed/, `dir` when it could not be moved, "" when
  // the cap kept nothing.
  std::string KeepFailed(const std::string& dir);

  std::string jobs_dir() const { return jobs_dir_; }
  std::string failed_dir() const { return jobs_dir_ + "/failed"; }

 private:
  // Removes the oldest directories of failed/ beyond max_kept_failed_.
  void PruneFailedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `dir` into failed/ and prunes; its path there, `dir` when it could
  // not be moved, "" when the cap kept nothing.
  std::string MoveToFailedLocked(const std::string& dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the lock of `dir`, if this object holds one.
  void Unlock(const std::string& dir);

  const std::string jobs_dir_;
  const int max_kept_failed_;
  absl::Mutex mu_;  // serializes this daemon's moves into and pruning of failed/
  absl::Mutex locks_mu_;
  absl::flat_hash_map<std::string, int> locks_ ABSL_GUARDED_BY(locks_mu_);  // dir → fd
};

}  // namespace smallem

#endif  // SMALLEM_WORKER_JOB_DIRS_H_
