#include "server/queue/worker_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace smallem {

absl::Status CheckWorkerId(std::string_view worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  if (worker_id.size() > kMaxWorkerIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id: ", worker_id.size(),
                                                   " bytes; at most ", kMaxWorkerIdBytes));
  }
  for (char c : worker_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._:@+-").find(c) == std::string_view::npos) {
      return absl::InvalidArgumentError(
          "worker_id: letters, digits and . _ : @ + - only (as smallem-worker makes them)");
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerRegistry::Register(WorkerRecord registration) {
  RETURN_IF_ERROR(CheckWorkerId(registration.id));
  if (registration.hostname.size() > kMaxHostnameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname: ", registration.hostname.size(), " bytes; at most ", kMaxHostnameBytes));
  }
  for (const auto& [name, value] : {std::pair{"slurm_job_id", &registration.slurm_job_id},
                                    std::pair{"slurm_node", &registration.slurm_node}}) {
    if (value->size() > kMaxSlurmFieldBytes ||
        !std::all_of(value->begin(), value->end(),
                     [](char c) { return absl::ascii_isgraph(static_cast<unsigned char>(c)); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": at most ", kMaxSlurmFieldBytes, " printable bytes without spaces"));
    }
  }
  const int64_t now = clock_->NowUnixMs();
  const std::string worker_id = registration.id;
  registration.registered_unix_ms = now;
  registration.last_seen_unix_ms = now;
  RETURN_IF_ERROR(store_->UpsertWorker(registration));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(LoadLocked());
  RememberLocked(worker_id, now);
  return absl::OkStatus();
}

absl::Status WorkerRegistry::Touch(std::string_view worker_id) {
  RETURN_IF_ERROR(CheckWorkerId(worker_id));
  const int64_t now = clock_->NowUnixMs();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(LoadLocked());
  auto it = last_seen_.find(std::string(worker_id));
  if (it != last_seen_.end()) {
    it->second = now;
    return absl::OkStatus();
  }
  // Forgotten from memory (the registry was full) but maybe stored.
  ASSIGN_OR_RETURN(std::vector<WorkerRecord> stored, store_->ListWorkers());
  for (const WorkerRecord& w : stored) {
    if (w.id == worker_id) {
      RememberLocked(w.id, now);
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", std::string(worker_id),
      " is not registered; a worker registers when it starts (restart smallem-worker)"));
}

absl::Status WorkerRegistry::LoadLocked() {
  if (loaded_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<WorkerRecord> stored, store_->ListWorkers());
  for (const WorkerRecord& w : stored) RememberLocked(w.id, w.last_seen_unix_ms);
  loaded_ = true;
  return absl::OkStatus();
}

void WorkerRegistry::RememberLocked(std::string worker_id, int64_t now) {
  if (last_seen_.size() >= kMaxTrackedWorkers && !last_seen_.contains(worker_id)) {
    auto oldest = std::min_element(last_seen_.begin(), last_seen_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    last_seen_.erase(oldest);
  }
  auto [it, inserted] = last_seen_.try_emplace(std::move(worker_id), now);
  it->second = std::max(it->second, now);
}

absl::StatusOr<std::vector<WorkerView>> WorkerRegistry::List() {
  ASSIGN_OR_RETURN(std::vector<WorkerRecord> workers, store_->ListWorkers());
  ASSIGN_OR_RETURN(std::vector<RunRecord> leased, store_->ListRunsWithStatus(RunStatus::kLeased));
  std::vector<WorkerView> out;
  absl::MutexLock lock(&mu_);
  for (WorkerRecord& w : workers) {
    WorkerView view{.record = std::move(w), .leased_run_ids = {}};
    auto it = last_seen_.find(view.record.id);
    if (it != last_seen_.end()) {
      view.record.last_seen_unix_ms = std::max(view.record.last_seen_unix_ms, it->second);
    }
    for (const RunRecord& run : leased) {
      if (run.lease_worker == view.record.id) view.leased_run_ids.push_back(run.id);
    }
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace smallem
