// WorkerRegistry: the workers the coordinator knows — registrations are
// stored (they survive a restart); last-seen times are kept in memory
// (updated on every worker call, so they cost no disk write) and merged with
// the stored ones when listed.
//
// Thread-safe.
#ifndef SMALLEM_SERVER_QUEUE_WORKER_REGISTRY_H_
#define SMALLEM_SERVER_QUEUE_WORKER_REGISTRY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "server/store/sqlite_store.h"

namespace smallem {

// Limits on what a worker registers: ids and names are short and printable
// (they travel in every listing), so that no registration can make
// ListWorkers too large to send or the registry grow without bound.
inline constexpr size_t kMaxWorkerIdBytes = 128;
inline constexpr size_t kMaxHostnameBytes = 255;
inline constexpr int kMaxDevicesPerWorker = 64;
inline constexpr size_t kMaxDeviceNameBytes = 128;
inline constexpr size_t kMaxSlurmFieldBytes = 128;  // a Slurm job id or node name
// Workers whose last call the registry remembers in memory, at most.
inline constexpr size_t kMaxTrackedWorkers = 10'000;

// OK for 1 to kMaxWorkerIdBytes bytes of [A-Za-z0-9._:@+-]; InvalidArgument
// otherwise (the message does not echo the id).
absl::Status CheckWorkerId(std::string_view worker_id);

struct WorkerView {
  WorkerRecord record;                 // last_seen_unix_ms is the freshest known
  std::vector<int64_t> leased_run_ids;
};

class WorkerRegistry {
 public:
  WorkerRegistry(SqliteStore* store, const Clock* clock) : store_(store), clock_(clock) {}

  // Stores (or replaces) a worker's registration: its id, hostname and
  // devices, and, under Slurm, its job id and node ("" otherwise; at most
  // kMaxSlurmFieldBytes each, printable, or InvalidArgument).
  // InvalidArgument for a bad id (CheckWorkerId) or a hostname over
  // kMaxHostnameBytes.
  absl::Status Register(WorkerRecord registration);
  // Notes that a registered worker called now. FailedPrecondition for an id
  // that never registered (registrations survive restarts: they are stored).
  absl::Status Touch(std::string_view worker_id);
  // Every registered worker, by id, with the runs it holds.
  absl::StatusOr<std::vector<WorkerView>> List();

 private:
  SqliteStore* const store_;
  const Clock* const clock_;
  absl::Mutex mu_;
  // Registered ids (loaded from the store on first use) → last call, Unix
  // ms. At most kMaxTrackedWorkers: the oldest is forgotten first (its
  // stored registration keeps its registration-time last_seen).
  absl::flat_hash_map<std::string, int64_t> last_seen_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;

  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberLocked(std::string worker_id, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_WORKER_REGISTRY_H_
