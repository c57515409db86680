#include "server/queue/job_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace smallem {

absl::StatusOr<std::string> ComposeRunSpec(const RunRecord& run, std::string_view dataset_hash) {
  nlohmann::json spec = nlohmann::json::parse(run.spec_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", run.id, ": the variant's spec is not a JSON object"));
  }
  spec["data"] = std::string(dataset_hash);
  spec["seed"] = run.seed;
  spec.erase("steps");
  spec.erase("minutes");
  if (run.budget_steps) spec["steps"] = *run.budget_steps;
  if (run.budget_minutes) spec["minutes"] = *run.budget_minutes;
  return spec.dump();
}

JobQueue::JobQueue(SqliteStore* store, const Clock* clock, JobQueueOptions options)
    : store_(store), clock_(clock), options_(options) {}

JobQueue::~JobQueue() { StopReaper(); }

RunStatus JobQueue::NextStatus(const RunRecord& run, const JobQueueOptions& options) {
  switch (run.last_failure) {
    case FailureClass::kInvalidConfig:
      return RunStatus::kFailed;
    case FailureClass::kDiverged:
      // An outcome of the spec and seed: running it again diverges again.
      return RunStatus::kDiverged;
    case FailureClass::kEngineError:
      return run.engine_failures > run.retry_budget ? RunStatus::kFailed : RunStatus::kQueued;
    case FailureClass::kLeaseLost:
      return run.lease_losses > options.max_lease_losses ? RunStatus::kFailed
                                                          : RunStatus::kQueued;
    case FailureClass::kNone:
      break;
  }
  return RunStatus::kFailed;
}

void JobQueue::NoteChange() {
  absl::MutexLock lock(&changes_mu_);
  ++changes_;
}

template <typename T>
T JobQueue::Changed(T result) {
  if (result.ok()) NoteChange();
  return result;
}

uint64_t JobQueue::changes() const {
  absl::MutexLock lock(&changes_mu_);
  return changes_;
}

bool JobQueue::WaitForChange(uint64_t seen, absl::Duration timeout) const {
  absl::MutexLock lock(&changes_mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(changes_mu_) { return changes_ != seen; };
  return changes_mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
}

absl::StatusOr<std::optional<Lease>> JobQueue::LeaseRun(std::string_view worker_id,
                                                        std::string_view device,
                                                        std::string_view device_class) {
  const int64_t now = clock_->NowUnixMs();
  ASSIGN_OR_RETURN(std::optional<LeaseRecord> leased,
                   store_->LeaseNextRun(worker_id, device, device_class, now,
                                        now + options_.lease_duration_ms));
  if (!leased) return std::optional<Lease>();
  NoteChange();
  ASSIGN_OR_RETURN(std::string spec, ComposeRunSpec(leased->run, leased->dataset_hash));
  // Only the attempt leased now can upload a newer checkpoint: this one
  // stays the run's until that attempt replaces it.
  ASSIGN_OR_RETURN(std::optional<CheckpointRecord> checkpoint,
                   store_->GetCheckpoint(leased->run.id));
  return std::optional<Lease>(Lease{.run_id = leased->run.id,
                                    .attempt = leased->run.attempt,
                                    .spec_json = std::move(spec),
                                    .dataset_hash = leased->dataset_hash,
                                    .expires_unix_ms = leased->run.lease_expires_unix_ms,
                                    .checkpoint = std::move(checkpoint)});
}

absl::StatusOr<HeartbeatOutcome> JobQueue::Heartbeat(int64_t run_id, int attempt,
                                                     std::string_view worker_id,
                                                     const std::vector<ProgressRecord>& points) {
  const int64_t now = clock_->NowUnixMs();
  return Changed(store_->Heartbeat(run_id, attempt, worker_id, points, now,
                                   now + options_.lease_duration_ms));
}

absl::StatusOr<bool> JobQueue::Complete(int64_t run_id, int attempt, std::string_view worker_id,
                                        std::string_view result_json,
                                        const std::vector<ProgressRecord>& points) {
  ASSIGN_OR_RETURN(const bool duplicate,
                   Changed(store_->Complete(run_id, attempt, worker_id, result_json, points,
                                            clock_->NowUnixMs())));
  // The result is recorded: the run's checkpoint is of no more use. Should
  // this fail, the reaper's sweep deletes it later.
  if (absl::StatusOr<int> deleted = store_->DeleteCheckpoints(run_id); !deleted.ok()) {
    spdlog::warn("run {}: its checkpoint stays until the reaper's next sweep: {}", run_id,
                 deleted.status().ToString());
  }
  return duplicate;
}

absl::StatusOr<bool> JobQueue::Fail(int64_t run_id, int attempt, std::string_view worker_id,
                                    FailureClass failure, std::string_view message,
                                    const DivergenceRecord& divergence) {
  if (failure == FailureClass::kNone) {
    return absl::InvalidArgumentError("a failure needs a class (lease_lost, engine_error or "
                                      "invalid_config or diverged)");
  }
  if (failure == FailureClass::kDiverged && divergence.step <= 0) {
    return absl::InvalidArgumentError("diverged_step: required for a diverged run (the step "
                                      "training stopped at, > 0)");
  }
  ASSIGN_OR_RETURN(RunRecord run,
                   store_->Fail(run_id, attempt, worker_id, failure, message,
                                clock_->NowUnixMs(),
                                [this](const RunRecord& r) { return NextStatus(r, options_); },
                                divergence));
  NoteChange();
  // One log line per failure, whatever the message holds (base/text.h).
  spdlog::info("run {} attempt {} failed ({}): {} → {}", run_id, attempt,
               FailureClassName(failure), SanitizeLine(message, 300), RunStatusName(run.status));
  return run.status == RunStatus::kQueued;
}

absl::Status JobQueue::Release(int64_t run_id, int attempt, std::string_view worker_id,
                               std::string_view reason) {
  ASSIGN_OR_RETURN(RunRecord run,
                   store_->Release(run_id, attempt, worker_id, reason, clock_->NowUnixMs()));
  NoteChange();
  spdlog::info("run {} attempt {}: released by worker {} ({}) → {}", run_id, attempt,
               SanitizeLine(worker_id, 130), SanitizeLine(reason, 300),
               RunStatusName(run.status));
  return absl::OkStatus();
}

absl::StatusOr<int> JobQueue::ReapExpiredLeases() {
  ASSIGN_OR_RETURN(std::vector<RunRecord> reaped,
                   store_->ReapExpiredLeases(clock_->NowUnixMs(), [this](const RunRecord& r) {
                     return NextStatus(r, options_);
                   }));
  if (!reaped.empty()) NoteChange();
  for (const RunRecord& run : reaped) {
    spdlog::warn("run {} attempt {}: lease of worker {} expired → {}", run.id, run.attempt,
                 run.lease_worker, RunStatusName(run.status));
  }
  return static_cast<int>(reaped.size());
}

absl::StatusOr<int> JobQueue::Cancel(const RunSelector& selector) {
  return Changed(store_->Cancel(selector, clock_->NowUnixMs()));
}

absl::StatusOr<int> JobQueue::Retry(const RunSelector& selector) {
  return Changed(store_->Retry(selector, clock_->NowUnixMs()));
}

absl::StatusOr<DeletedExperiment> JobQueue::DeleteExperiment(int64_t experiment_id,
                                                             bool force) {
  return Changed(store_->DeleteExperiment(experiment_id, force));
}

void JobQueue::StartReaper() {
  absl::MutexLock lock(&mu_);
  if (reaper_.joinable()) return;
  stopping_ = false;
  reaper_ = std::thread([this] { ReaperLoop(); });
}

void JobQueue::StopReaper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

void JobQueue::ReaperLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping),
                           absl::Milliseconds(options_.reap_interval_ms));
      if (stopping_) return;
    }
    absl::StatusOr<int> reaped = ReapExpiredLeases();
    // A busy database is transient; the next round tries again.
    if (!reaped.ok()) spdlog::error("reaper: {}", reaped.status().ToString());
    // Checkpoints of runs that ended (a crash between a result and its
    // checkpoint's deletion, a failed or cancelled run) go too.
    absl::StatusOr<int> swept = store_->DeleteFinishedRunsCheckpoints();
    if (!swept.ok()) spdlog::error("reaper: checkpoints: {}", swept.status().ToString());
  }
}

}  // namespace smallem
