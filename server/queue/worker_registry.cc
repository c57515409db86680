#include "server/queue/worker_registry.h"

#include <algorithm>

#include "base/status_macros.h"

namespace smallem {

absl::Status WorkerRegistry::Register(std::string_view worker_id, std::string_view hostname,
                                      std::string devices_json) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  const int64_t now = clock_->NowUnixMs();
  RETURN_IF_ERROR(store_->UpsertWorker(WorkerRecord{
      .id = std::string(worker_id), .hostname = std::string(hostname),
      .devices_json = std::move(devices_json), .registered_unix_ms = now,
      .last_seen_unix_ms = now}));
  Touch(worker_id);
  return absl::OkStatus();
}

void WorkerRegistry::Touch(std::string_view worker_id) {
  const int64_t now = clock_->NowUnixMs();
  absl::MutexLock lock(&mu_);
  last_seen_[std::string(worker_id)] = now;
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
