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

struct WorkerView {
  WorkerRecord record;                 // last_seen_unix_ms is the freshest known
  std::vector<int64_t> leased_run_ids;
};

class WorkerRegistry {
 public:
  WorkerRegistry(SqliteStore* store, const Clock* clock) : store_(store), clock_(clock) {}

  // Stores (or replaces) a worker's registration. InvalidArgument for an
  // empty id.
  absl::Status Register(std::string_view worker_id, std::string_view hostname,
                        std::string devices_json);
  // Notes that the worker called now.
  void Touch(std::string_view worker_id);
  // Every registered worker, by id, with the runs it holds.
  absl::StatusOr<std::vector<WorkerView>> List();

 private:
  SqliteStore* const store_;
  const Clock* const clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> last_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_WORKER_REGISTRY_H_
