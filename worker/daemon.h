// WorkerDaemon: smallem-worker's main loop. It registers its devices with
// the coordinator, then runs one loop per device: lease a run, make sure its
// dataset is in the local cache, spawn ONE child process
// (`<child_program> child --spec ... --out ... --device ...`, see
// worker/child.h; a CUDA device's child sees only its GPU) for it, relay the
// child's progress in heartbeats, and report the outcome (Complete; Fail
// with FAILURE_CLASS_DIVERGED when the result says the run diverged; or Fail
// with the failure class ClassifyChildFailure gives and the child's stderr
// as the message). The daemon itself never initializes CUDA.
//
//  * Job directories (worker/job_dirs.h): removed once the coordinator has
//    recorded the result, or the run was cancelled; kept under
//    CACHE/jobs/failed/ otherwise (the newest max_failed_job_dirs).
//  * Checkpoints (docs/reliability.md): each one the child writes is
//    uploaded at once, between heartbeats; a lease naming a checkpoint has
//    it fetched first and the child resumes from it.
//  * Cancel: a heartbeat answering `cancel` kills the child; nothing is
//    reported.
//  * Lease lost: a heartbeat answering FailedPrecondition/NotFound (the
//    coordinator gave the run to someone else) kills the child.
//  * Coordinator away: calls fail fast; the loop backs off exponentially
//    (with jitter) up to max_backoff_ms, re-registers when it is back, and
//    keeps running children meanwhile (their progress waits for the next
//    heartbeat that gets through; Complete and Fail are retried — both are
//    idempotent on the coordinator).
//  * Drain: lease nothing more, let running children finish and report,
//    then Run returns.
//  * Stop (SIGTERM: a scheduler's time limit or `scancel`, a service stop):
//    lease nothing more; each child is told to stop (SIGTERM), writes a
//    checkpoint of the steps it trained since its last, and exits; the
//    daemon uploads that checkpoint and hands the run back with the Release
//    rpc — requeued at once, charged to nothing, resumed from that step.
//    A child that outlasts options.stop_grace, or a second Stop, is killed:
//    the run then resumes from its last uploaded checkpoint.
//
// Time (when a heartbeat is due, when a backoff or an idle pause ends) comes
// from the injected Clock, so tests move it instead of sleeping; the daemon
// looks at the clock at least every kClockCheckMs of real time while it
// waits. RPC deadlines and the child's output are real time.
//
// Thread-safe: Drain and Stop may be called from any thread while Run runs.
#ifndef SMALLEM_WORKER_DAEMON_H_
#define SMALLEM_WORKER_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "nlohmann/json_fwd.hpp"
#include "worker/coordinator_client.h"
#include "worker/dataset_cache.h"
#include "worker/devices.h"
#include "worker/job_dirs.h"

namespace smallem {

class ChildProcess;
struct CheckpointWritten;
struct DivergedResult;

struct WorkerOptions {
  std::string coordinator = "127.0.0.1:7070";  // host:port
  ChannelSecurity security;     // worker token and TLS root for the coordinator; none = plaintext
  std::vector<DeviceInfo> devices;
  std::string cache_dir;        // datasets/ and jobs/ live here
  std::string child_program;    // executable run as `child_program child --spec ...`
  std::string worker_id;        // "" = <hostname>-<pid>
  // Where the worker runs when Slurm started it ("" otherwise; RunWorker
  // fills them from $SLURM_JOB_ID and $SLURMD_NODENAME). Registered, shown
  // by `smallemctl workers`.
  std::string slurm_job_id;
  std::string slurm_node;
  int child_threads = 0;        // CPU threads per child; 0 = all
  int64_t progress_every = 10;  // steps between the child's progress lines
  int max_failed_job_dirs = 20; // failed jobs' directories kept for debugging
  int64_t initial_backoff_ms = 200;  // on the clock
  int64_t max_backoff_ms = 5'000;     // on the clock
  absl::Duration rpc_deadline = absl::Seconds(10);  // per call (a dataset fetch: 10 minutes)
  // On Stop, how long (real time) a child may take to write its last
  // checkpoint, which is uploaded, before it is killed: inside Slurm's
  // default KillWait (30 s) and systemd's stop timeout (90 s).
  absl::Duration stop_grace = absl::Seconds(20);
  const Clock* clock = nullptr;  // nullptr = SystemClock; must outlive the daemon
};

class WorkerDaemon {
 public:
  explicit WorkerDaemon(WorkerOptions options);
  ~WorkerDaemon();

  // Runs until Drain or Stop has taken effect. InvalidArgument for options
  // without devices, cache directory or child program.
  absl::Status Run();
  void Drain();
  void Stop();

  const std::string& worker_id() const { return options_.worker_id; }

  // Real time between two looks at the clock while waiting on it.
  static constexpr int64_t kClockCheckMs = 20;

 private:
  // One leased attempt, as the steps of RunJob share it (daemon_job.cc).
  struct Job;
  // How a child's supervision ended.
  enum class ChildEnd { kExited, kStopped, kCancelled, kLeaseLost };

  void DeviceLoop(const DeviceInfo& device);
  // Registers unless already registered; false when the coordinator could
  // not be reached (the caller backs off).
  bool EnsureRegistered();
  // Waits until `ms` have passed on the clock; Stop ends the wait early, and
  // so does Drain when `wake_on_drain`. Returns false when ended early.
  bool WaitOnClock(int64_t ms, bool wake_on_drain) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t NextBackoffMs(int64_t current) const;

  // RunJob and its steps, in order (daemon_job.cc). A step that fails
  // reports the failure itself and returns no value (false, nullopt,
  // nullptr).
  void RunJob(const DeviceInfo& device, const v1::LeaseResponse& lease);
  // The leased dataset's local directory, from the cache or the coordinator.
  std::optional<std::string> EnsureJobDataset(const Job& job, const std::string& dataset_hash);
  // The job's directory, holding spec.json: the leased spec pointed at the
  // local dataset.
  bool WriteJobSpec(const std::string& spec_json, const std::string& dataset_dir, Job* job);
  std::unique_ptr<ChildProcess> SpawnJobChild(const Job& job);
  // Relays the child's progress in heartbeats until it exits, or kills it
  // when the run is cancelled or the lease is lost. When the worker stops,
  // the child is told to stop and given options.stop_grace to checkpoint
  // and exit (kExited: ReportChildExit releases its run) before it is
  // killed (kStopped).
  ChildEnd SuperviseChild(ChildProcess& child, Job* job);
  // Uploads a checkpoint the child wrote (worker/checkpoint_transfer.h);
  // kLeaseLost when the coordinator says the attempt is over, else nullopt
  // (a failed upload is logged; the next checkpoint tries again).
  std::optional<ChildEnd> UploadJobCheckpoint(const Job& job, const CheckpointWritten& written);
  // Sends one heartbeat with the points gathered so far; kCancelled or
  // kLeaseLost when the reply says the attempt is over, else nullopt.
  std::optional<ChildEnd> Heartbeat(Job* job);
  // Reports how the exited child ended: Complete with its result, Fail with
  // FAILURE_CLASS_DIVERGED when its result says it diverged, or Fail.
  void ReportChildExit(ChildProcess& child, const Job& job);
  // Hands the stopped attempt's run back to the queue (Release, retried
  // while transient until the rpc deadline; Stop is already in effect).
  void ReleaseRun(const Job& job);
  // Reports a run whose result.json says it diverged (its step and last
  // finite loss), retried like Complete.
  void ReportDivergence(const Job& job, const DivergedResult& result);
  // Reports the attempt failed (retried until it gets through or Stop).
  void ReportFailure(const Job& job, v1::FailureClass failure, const std::string& message);
  // Keeps the job's directory for debugging (within the cap).
  void KeepJobDir(const Job& job);
  // Retries a report (Complete/Fail) until it gets through, is refused for
  // good, or Stop. Returns the last status.
  template <typename Call>
  absl::Status ReportWithRetry(const char* what, int64_t run_id, Call call);

  bool draining() ABSL_LOCKS_EXCLUDED(mu_);
  bool stopping() ABSL_LOCKS_EXCLUDED(mu_);
  bool hurrying() ABSL_LOCKS_EXCLUDED(mu_);

  WorkerOptions options_;
  const Clock* const clock_;
  std::unique_ptr<CoordinatorClient> client_;
  DatasetCache cache_;
  JobDirs jobs_;

  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool hurry_ ABSL_GUARDED_BY(mu_) = false;  // Stop called again: no grace
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  // Why the coordinator refused this worker for good (a wrong token, a bad
  // id): Run stops and returns it instead of retrying forever.
  absl::Status refused_ ABSL_GUARDED_BY(mu_);
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 2'000;
};

// smallem-worker's body: runs a WorkerDaemon. SIGTERM stops it (what Slurm
// sends at a job's time limit or on `scancel`, and systemd on a stop: the
// running runs go back to the queue at once); SIGINT (Ctrl-C) drains it, and
// any signal after the first stops it. Under Slurm ($SLURM_JOB_ID set), the
// job id and node are registered with the coordinator.
//
// With `parent_pid` (the process that started this one, such as `smallemctl
// run`), the worker dies with it: the kernel kills it (SIGKILL; its
// children follow) when the thread of that process that started it ends,
// and it returns 1 at once when `parent_pid` is no longer its parent.
// Returns the exit code.
int RunWorker(WorkerOptions options, pid_t parent_pid = 0);

}  // namespace smallem

#endif  // SMALLEM_WORKER_DAEMON_H_
