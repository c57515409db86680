// WorkerDaemon::RunJob: one leased run, from dataset to reported outcome.
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
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
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The result as the coordinator records it: "device" names the worker's
// device (cuda:1), not the child's view of it (a GPU child sees only its own
// GPU, as cuda:0). A result that is not a JSON object passes unchanged (the
// coordinator's checks report it).
std::string WithWorkerDevice(const std::string& result_json, const std::string& device) {
  nlohmann::json result = nlohmann::json::parse(result_json, nullptr, false);
  if (!result.is_object()) return result_json;
  result["device"] = device;
  return result.dump();
}

}  // namespace

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

void WorkerDaemon::RunJob(const DeviceInfo& device, const v1::LeaseResponse& lease) {
  const int64_t run_id = lease.run_id();
  const int attempt = lease.attempt();
  spdlog::info("run {} attempt {}: leased on {}", run_id, attempt, device.name);
  auto fail = [&](v1::FailureClass failure, const std::string& message) {
    v1::FailRequest request;
    request.set_worker_id(options_.worker_id);
    request.set_run_id(run_id);
    request.set_attempt(attempt);
    request.set_failure_class(failure);
    request.set_message(message);
    spdlog::warn("run {} attempt {}: {} ({})", run_id, attempt, message,
                 v1::FailureClass_Name(failure));
    ReportWithRetry("Fail", run_id, [&] { return client_->Fail(request).status(); }).IgnoreError();
  };

  // 1. The dataset, from the cache or the coordinator.
  absl::StatusOr<std::string> dataset = cache_.Ensure(lease.dataset_hash(), *client_);
  if (!dataset.ok()) {
    // Unreachable coordinator: infrastructure. Anything else (a corrupt
    // transfer, a full disk) is an error of this attempt, retried.
    fail(IsTransient(dataset.status()) ? v1::FAILURE_CLASS_LEASE_LOST
                                       : v1::FAILURE_CLASS_ENGINE_ERROR,
         absl::StrCat("dataset ", lease.dataset_hash(), ": ", dataset.status().message()));
    return;
  }

  // 2. The spec, pointed at the local dataset, in the job's directory.
  nlohmann::json spec = nlohmann::json::parse(lease.spec_json(), nullptr, false);
  if (!spec.is_object()) {
    fail(v1::FAILURE_CLASS_INVALID_CONFIG, "the leased spec is not a JSON object");
    return;
  }
  spec["data"] = *dataset;
  absl::StatusOr<std::string> created = jobs_.Create(run_id, attempt);
  if (!created.ok()) {
    fail(v1::FAILURE_CLASS_ENGINE_ERROR, std::string(created.status().message()));
    return;
  }
  const std::string job_dir = *created;
  // The job failed (or its outcome could not be recorded): keep its
  // directory for debugging, within the cap.
  auto keep = [&] {
    const std::string kept = jobs_.KeepFailed(job_dir);
    if (!kept.empty()) spdlog::info("run {} attempt {}: kept {}", run_id, attempt, kept);
  };
  const std::string spec_path = job_dir + "/spec.json";
  {
    std::ofstream out(spec_path, std::ios::trunc);
    out << spec.dump(2) << "\n";
    if (!out) {
      fail(v1::FAILURE_CLASS_ENGINE_ERROR, absl::StrCat("cannot write ", spec_path));
      keep();
      return;
    }
  }

  // 3. The child, on this device alone.
  ChildArgs child_args{.spec_path = spec_path,
                       .out_dir = job_dir,
                       .threads = options_.child_threads,
                       .progress_every = options_.progress_every,
                       .device = device.name};
  absl::StatusOr<ChildCommand> command = BuildChildCommand(child_args, CurrentEnvironment());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      command.ok() ? ChildProcess::Spawn(options_.child_program, command->args, command->env)
                   : absl::StatusOr<std::unique_ptr<ChildProcess>>(command.status());
  if (!child.ok()) {
    fail(v1::FAILURE_CLASS_ENGINE_ERROR, std::string(child.status().message()));
    keep();
    return;
  }

  // 4. Relay progress until the child ends, honouring cancel and lease loss.
  v1::HeartbeatRequest beat;
  beat.set_worker_id(options_.worker_id);
  beat.set_run_id(run_id);
  beat.set_attempt(attempt);
  int64_t interval_ms;
  {
    absl::MutexLock lock(&mu_);
    interval_ms = heartbeat_interval_ms_;
  }
  int64_t last_beat_ms = clock_->NowUnixMs();
  bool running = true;
  while (running) {
    std::vector<std::string> lines;
    running = (*child)->Poll(100, &lines);
    for (const std::string& line : lines) {
      if (std::optional<TrainProgress> p = ParseProgressLine(line)) {
        AddPoint(*p, beat.mutable_points());
      }
    }
    if (stopping()) {
      (*child)->Kill();
      (*child)->Wait();
      fail(v1::FAILURE_CLASS_LEASE_LOST, "the worker was stopped");
      keep();
      return;
    }
    // A clock set back (the wall clock corrected) sends one beat early.
    const int64_t now = clock_->NowUnixMs();
    if (running && (now - last_beat_ms >= interval_ms || now < last_beat_ms)) {
      last_beat_ms = now;
      absl::StatusOr<v1::HeartbeatResponse> reply = client_->Heartbeat(beat);
      if (reply.ok()) {
        beat.clear_points();
        if (reply->cancel()) {
          spdlog::info("run {} attempt {}: cancelled; stopping its child", run_id, attempt);
          (*child)->Kill();
          (*child)->Wait();
          jobs_.Remove(job_dir);
          return;
        }
      } else if (LeaseIsGone(reply.status())) {
        spdlog::warn("run {} attempt {}: lease lost ({}); stopping its child", run_id, attempt,
                     std::string(reply.status().message()));
        (*child)->Kill();
        (*child)->Wait();
        keep();
        return;
      }
      // Transient: the points wait for the next heartbeat that gets through.
    }
  }
  const ChildExit exit = (*child)->Wait();

  // 5. The outcome.
  if (exit.ok()) {
    absl::StatusOr<std::string> result = ReadFile(job_dir + "/result.json");
    if (!result.ok()) {
      fail(v1::FAILURE_CLASS_ENGINE_ERROR, "the child exited 0 without writing result.json");
      keep();
      return;
    }
    v1::CompleteRequest request;
    request.set_worker_id(options_.worker_id);
    request.set_run_id(run_id);
    request.set_attempt(attempt);
    request.set_result_json(WithWorkerDevice(*result, device.name));
    *request.mutable_points() = beat.points();
    absl::Status status =
        ReportWithRetry("Complete", run_id, [&] { return client_->Complete(request).status(); });
    if (status.ok()) {
      // The coordinator holds the result now: nothing here is needed.
      spdlog::info("run {} attempt {}: completed", run_id, attempt);
      jobs_.Remove(job_dir);
    } else {
      keep();
    }
    return;
  }
  // A CUDA error or out of memory fails this child only; the loop goes on.
  const std::vector<std::string> tail = (*child)->stderr_tail();
  fail(ClassifyChildFailure(exit, tail), ChildFailureMessage(exit, tail));
  keep();
}

}  // namespace smallem
