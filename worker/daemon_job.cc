// WorkerDaemon::RunJob: one leased run, from dataset to reported outcome, in
// steps: the dataset, the job's directory and spec, the child, its
// supervision (progress relayed in heartbeats), the outcome reported.
#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/files.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "runspec/run_result.h"
#include "worker/checkpoint_transfer.h"
#include "worker/child.h"
#include "worker/child_process.h"
#include "worker/daemon.h"

namespace smallem {
namespace {

// The attempt is no longer ours: the coordinator gave the run to another
// attempt, cancelled it, or forgot it.
bool LeaseIsGone(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition ||
         status.code() == absl::StatusCode::kNotFound;
}

void AddPoint(const TrainProgress& p, google::protobuf::RepeatedPtrField<v1::Progress>* out) {
  v1::Progress* point = out->Add();
  point->set_step(p.step);
  point->set_total_steps(p.total_steps);
  point->set_loss(p.loss);
  point->set_tokens_per_s(p.tokens_per_s);
  point->set_elapsed_s(p.elapsed_s);
  point->set_eta_s(p.eta_s);
  point->set_max_over_mean_load(p.max_over_mean_load);
  point->mutable_tokens_per_expert()->Add(p.tokens_per_expert.begin(), p.tokens_per_expert.end());
}

// The result as the coordinator records it: "device" names the worker's
// device (cuda:1), not the child's view of it (a GPU child sees only its own
// GPU, as cuda:0). A result that does not read as one passes unchanged (the
// coordinator's checks report it).
std::string WithWorkerDevice(const std::string& result_json, const std::string& device) {
  absl::StatusOr<RunResult> result =
      RunResult::FromJson(nlohmann::json::parse(result_json, nullptr, false));
  if (!result.ok()) return result_json;
  result->device = device;
  return result->ToJson().dump();
}

}  // namespace

struct WorkerDaemon::Job {
  DeviceInfo device;       // the worker's device the child trains on
  int64_t run_id = 0;
  int attempt = 0;
  std::string dir;         // CACHE/jobs/run-R-attempt-A; "" until created
  std::string spec_path;   // dir/spec.json
  v1::HeartbeatRequest beat;  // progress points not yet acknowledged
  std::string resume_path;    // dir/resume.ckpt when resuming, else ""
};

template <typename Call>
absl::Status WorkerDaemon::ReportWithRetry(const char* what, int64_t run_id, Call call) {
  int64_t backoff_ms = options_.initial_backoff_ms;
  while (true) {
    absl::Status status = call();
    if (status.ok() || !IsTransient(status)) {
      if (!status.ok()) {
        spdlog::warn("run {}: {} refused: {}", run_id, what, std::string(status.message()));
      }
      return status;
    }
    spdlog::warn("run {}: {} failed ({}); retrying in {} ms", run_id, what,
                 std::string(status.message()), backoff_ms);
    if (stopping()) return status;
    // Not woken by Drain: a draining worker still reports what it ran.
    WaitOnClock(backoff_ms, /*wake_on_drain=*/false);
    backoff_ms = NextBackoffMs(backoff_ms);
  }
}

void WorkerDaemon::ReportFailure(const Job& job, v1::FailureClass failure,
                                 const std::string& message) {
  v1::FailRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_run_id(job.run_id);
  request.set_attempt(job.attempt);
  request.set_failure_class(failure);
  request.set_message(message);
  // "engine error", not FAILURE_CLASS_ENGINE_ERROR: the log is for people.
  std::string kind = absl::AsciiStrToLower(v1::FailureClass_Name(failure));
  absl::StrReplaceAll({{"failure_class_", ""}, {"_", " "}}, &kind);
  spdlog::warn("run {} attempt {}: {} ({})", job.run_id, job.attempt, message, kind);
  ReportWithRetry("Fail", job.run_id, [&] { return client_->Fail(request).status(); })
      .IgnoreError();
}

void WorkerDaemon::ReleaseRun(const Job& job) {
  v1::ReleaseRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_run_id(job.run_id);
  request.set_attempt(job.attempt);
  request.set_reason(options_.slurm_job_id.empty()
                         ? std::string("the worker was stopped")
                         : absl::StrCat("the worker was stopped: Slurm job ",
                                        options_.slurm_job_id, " was signalled"));
  // Stopping: ReportWithRetry makes one try. One is enough in the common
  // case; when it does not get through, the lease expires and the reaper
  // requeues the run (charged as a lost lease) — later, but never lost.
  absl::Status status =
      ReportWithRetry("Release", job.run_id, [&] { return client_->Release(request).status(); });
  if (status.ok()) {
    spdlog::info("run {} attempt {}: released back to the queue", job.run_id, job.attempt);
  }
}

void WorkerDaemon::ReportDivergence(const Job& job, const DivergedResult& result) {
  v1::FailRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_run_id(job.run_id);
  request.set_attempt(job.attempt);
  request.set_failure_class(v1::FAILURE_CLASS_DIVERGED);
  const int64_t step = result.diverged_step;
  request.set_diverged_step(step);
  if (result.last_finite_loss) request.set_last_finite_loss(*result.last_finite_loss);
  request.set_message(absl::StrCat("training diverged at step ", step,
                                   ": a loss or gradient norm was not finite (lower the "
                                   "learning rate, or raise warmup)"));
  spdlog::warn("run {} attempt {}: {}", job.run_id, job.attempt, request.message());
  absl::Status status =
      ReportWithRetry("Fail", job.run_id, [&] { return client_->Fail(request).status(); });
  if (!status.ok()) {
    KeepJobDir(job);
    return;
  }
  // An outcome the coordinator holds now: nothing here is needed.
  jobs_.Remove(job.dir);
}

void WorkerDaemon::KeepJobDir(const Job& job) {
  const std::string kept = jobs_.KeepFailed(job.dir);
  if (!kept.empty()) spdlog::info("run {} attempt {}: kept {}", job.run_id, job.attempt, kept);
}

void WorkerDaemon::RunJob(const DeviceInfo& device, const v1::LeaseResponse& lease) {
  Job job;
  job.device = device;
  job.run_id = lease.run_id();
  job.attempt = lease.attempt();
  job.beat.set_worker_id(options_.worker_id);
  job.beat.set_run_id(job.run_id);
  job.beat.set_attempt(job.attempt);
  spdlog::info("run {} attempt {}: leased on {}", job.run_id, job.attempt, device.name);

  std::optional<std::string> dataset = EnsureJobDataset(job, lease.dataset_hash());
  if (!dataset.has_value() || !WriteJobSpec(lease.spec_json(), *dataset, &job)) return;
  if (!lease.checkpoint_sha256().empty()) {
    // A checkpoint that cannot be fetched costs the work since it, not the
    // run: the child starts from the beginning.
    const std::string path = job.dir + "/resume.ckpt";
    absl::Status fetched = DownloadCheckpoint(
        *client_, CheckpointAttempt{options_.worker_id, job.run_id, job.attempt},
        lease.checkpoint_sha256(), lease.checkpoint_bytes(), path, absl::Minutes(10));
    if (fetched.ok()) {
      job.resume_path = path;
      spdlog::info("run {} attempt {}: resuming from the checkpoint at step {}", job.run_id,
                   job.attempt, lease.checkpoint_step());
    } else {
      spdlog::warn("run {} attempt {}: starting afresh, its checkpoint could not be fetched: {}",
                   job.run_id, job.attempt, std::string(fetched.message()));
    }
  }
  std::unique_ptr<ChildProcess> child = SpawnJobChild(job);
  if (child == nullptr) return;
  switch (SuperviseChild(*child, &job)) {
    case ChildEnd::kExited:
      ReportChildExit(*child, job);
      return;
    case ChildEnd::kStopped:
      ReleaseRun(job);
      KeepJobDir(job);
      return;
    case ChildEnd::kCancelled:
      jobs_.Remove(job.dir);
      return;
    case ChildEnd::kLeaseLost:
      KeepJobDir(job);
      return;
  }
}

std::optional<std::string> WorkerDaemon::EnsureJobDataset(const Job& job,
                                                          const std::string& dataset_hash) {
  absl::StatusOr<std::string> dataset = cache_.Ensure(dataset_hash, *client_);
  if (dataset.ok()) return *dataset;
  // Unreachable coordinator: infrastructure. Anything else (a corrupt
  // transfer, a full disk) is an error of this attempt, retried.
  ReportFailure(job,
                IsTransient(dataset.status()) ? v1::FAILURE_CLASS_LEASE_LOST
                                              : v1::FAILURE_CLASS_ENGINE_ERROR,
                absl::StrCat("dataset ", dataset_hash, ": ", dataset.status().message()));
  return std::nullopt;
}

bool WorkerDaemon::WriteJobSpec(const std::string& spec_json, const std::string& dataset_dir,
                                Job* job) {
  nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) {
    ReportFailure(*job, v1::FAILURE_CLASS_INVALID_CONFIG, "the leased spec is not a JSON object");
    return false;
  }
  spec["data"] = dataset_dir;
  absl::StatusOr<std::string> created = jobs_.Create(job->run_id, job->attempt);
  if (!created.ok()) {
    ReportFailure(*job, v1::FAILURE_CLASS_ENGINE_ERROR, std::string(created.status().message()));
    return false;
  }
  job->dir = *created;
  job->spec_path = job->dir + "/spec.json";
  if (absl::Status written = WriteFileDurably(job->spec_path, spec.dump(2) + "\n");
      !written.ok()) {
    ReportFailure(*job, v1::FAILURE_CLASS_ENGINE_ERROR, std::string(written.message()));
    KeepJobDir(*job);
    return false;
  }
  return true;
}

std::unique_ptr<ChildProcess> WorkerDaemon::SpawnJobChild(const Job& job) {
  // The child trains on this device alone.
  ChildArgs child_args{.spec_path = job.spec_path,
                       .out_dir = job.dir,
                       .threads = options_.child_threads,
                       .progress_every = options_.progress_every,
                       .device = job.device.name,
                       .checkpoint_path = job.dir + "/checkpoint.ckpt",
                       .resume_path = job.resume_path};
  absl::StatusOr<ChildCommand> command = BuildChildCommand(child_args, CurrentEnvironment());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      command.ok() ? ChildProcess::Spawn(options_.child_program, command->args, command->env)
                   : absl::StatusOr<std::unique_ptr<ChildProcess>>(command.status());
  if (!child.ok()) {
    ReportFailure(job, v1::FAILURE_CLASS_ENGINE_ERROR, std::string(child.status().message()));
    KeepJobDir(job);
    return nullptr;
  }
  return *std::move(child);
}

WorkerDaemon::ChildEnd WorkerDaemon::SuperviseChild(ChildProcess& child, Job* job) {
  int64_t interval_ms;
  {
    absl::MutexLock lock(&mu_);
    interval_ms = heartbeat_interval_ms_;
  }
  int64_t last_beat_ms = clock_->NowUnixMs();
  // Set once the worker stops: the real time by which the child must exit.
  std::optional<std::chrono::steady_clock::time_point> stop_deadline;
  while (true) {
    std::vector<std::string> lines;
    const bool running = child.Poll(100, &lines);
    std::optional<ChildEnd> end;
    for (const std::string& line : lines) {
      if (std::optional<TrainProgress> p = ParseProgressLine(line)) {
        AddPoint(*p, job->beat.mutable_points());
      } else if (std::optional<CheckpointWritten> c = ParseCheckpointLine(line); c && !end) {
        end = UploadJobCheckpoint(*job, *c);
      }
    }
    const int64_t now = clock_->NowUnixMs();
    // A clock set back (the wall clock corrected) sends one beat early.
    const bool beat_due = now - last_beat_ms >= interval_ms || now < last_beat_ms;
    if (end.has_value()) {
      // The upload found the lease gone.
    } else if (!running) {
      return ChildEnd::kExited;
    } else if (stopping() && !stop_deadline) {
      // The child writes a checkpoint of what it trained and exits; its
      // line is uploaded above, then ReportChildExit releases the run.
      // (Under Slurm the child may have had the SIGTERM already.)
      child.Terminate();
      stop_deadline = std::chrono::steady_clock::now() +
                      absl::ToChronoMilliseconds(options_.stop_grace);
    } else if (stop_deadline &&
               (hurrying() || std::chrono::steady_clock::now() > *stop_deadline)) {
      spdlog::warn("run {} attempt {}: its child did not stop in time; killing it (the run "
                   "resumes from its last uploaded checkpoint)", job->run_id, job->attempt);
      end = ChildEnd::kStopped;
    } else if (beat_due) {
      last_beat_ms = now;
      end = Heartbeat(job);
    }
    if (end.has_value()) {
      child.Kill();
      child.Wait();
      return *end;
    }
  }
}

std::optional<WorkerDaemon::ChildEnd> WorkerDaemon::UploadJobCheckpoint(
    const Job& job, const CheckpointWritten& written) {
  absl::StatusOr<int64_t> stored = UploadCheckpointFile(
      *client_, CheckpointAttempt{options_.worker_id, job.run_id, job.attempt}, written.path,
      written.steps, absl::Minutes(10));
  if (stored.ok()) {
    spdlog::info("run {} attempt {}: checkpoint at step {} stored ({} bytes)", job.run_id,
                 job.attempt, written.steps, *stored);
    return std::nullopt;
  }
  if (LeaseIsGone(stored.status())) {
    spdlog::warn("run {} attempt {}: lease lost ({}); stopping its child", job.run_id,
                 job.attempt, std::string(stored.status().message()));
    return ChildEnd::kLeaseLost;
  }
  // The next checkpoint tries again; until then a resume starts earlier.
  spdlog::warn("run {} attempt {}: checkpoint at step {} not stored: {}", job.run_id,
               job.attempt, written.steps, std::string(stored.status().message()));
  return std::nullopt;
}

std::optional<WorkerDaemon::ChildEnd> WorkerDaemon::Heartbeat(Job* job) {
  absl::StatusOr<v1::HeartbeatResponse> reply = client_->Heartbeat(job->beat);
  if (reply.ok()) {
    job->beat.clear_points();
    if (reply->cancel()) {
      spdlog::info("run {} attempt {}: cancelled; stopping its child", job->run_id, job->attempt);
      return ChildEnd::kCancelled;
    }
  } else if (LeaseIsGone(reply.status())) {
    spdlog::warn("run {} attempt {}: lease lost ({}); stopping its child", job->run_id,
                 job->attempt, std::string(reply.status().message()));
    return ChildEnd::kLeaseLost;
  }
  // Transient: the points wait for the next heartbeat that gets through.
  return std::nullopt;
}

void WorkerDaemon::ReportChildExit(ChildProcess& child, const Job& job) {
  const ChildExit exit = child.Wait();
  if (exit.exit_code == kExitTerminated || exit.signal == SIGTERM) {
    // Slurm (and systemd without KillMode=mixed) sends SIGTERM to every
    // process of the job, the child included: the child may end before
    // this daemon has taken its own SIGTERM. The run is no more at fault
    // than on Stop: hand it back.
    ReleaseRun(job);
    KeepJobDir(job);
    return;
  }
  if (!exit.ok()) {
    // A CUDA error or out of memory fails this child only; the loop goes on.
    const std::vector<std::string> tail = child.stderr_tail();
    ReportFailure(job, ClassifyChildFailure(exit, tail), ChildFailureMessage(exit, tail));
    KeepJobDir(job);
    return;
  }
  absl::StatusOr<std::string> result = ReadFile(job.dir + "/result.json");
  if (!result.ok()) {
    ReportFailure(job, v1::FAILURE_CLASS_ENGINE_ERROR,
                  "the child exited 0 without writing result.json");
    KeepJobDir(job);
    return;
  }
  const nlohmann::json parsed = nlohmann::json::parse(*result, nullptr, false);
  if (IsDivergedResultJson(parsed)) {
    absl::StatusOr<DivergedResult> diverged = DivergedResult::FromJson(parsed);
    if (!diverged.ok()) {
      // Still an outcome of the run, not the worker's failure: reported at
      // step 0 with no loss rather than retried.
      spdlog::warn("run {}: {}", job.run_id, std::string(diverged.status().message()));
    }
    ReportDivergence(job, diverged.ok() ? *diverged : DivergedResult{});
    return;
  }
  v1::CompleteRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_run_id(job.run_id);
  request.set_attempt(job.attempt);
  request.set_result_json(WithWorkerDevice(*result, job.device.name));
  *request.mutable_points() = job.beat.points();
  absl::Status status =
      ReportWithRetry("Complete", job.run_id, [&] { return client_->Complete(request).status(); });
  if (!status.ok()) {
    KeepJobDir(job);
    return;
  }
  // The coordinator holds the result now: nothing here is needed.
  spdlog::info("run {} attempt {}: completed", job.run_id, job.attempt);
  jobs_.Remove(job.dir);
}

}  // namespace smallem
