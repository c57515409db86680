// ReadOnlyCoordinator: a coordinator's client service over its database
// opened read-only, served in this process — no port, no workers, no
// reaper. `smallemctl report --db FILE` (and status, noise, export) read a
// database through it with the very handlers a coordinator answers with, so
// the report read here is the report a coordinator would give. Calls that
// write (submit, cancel, retry) fail with PermissionDenied.
//
// Readers do not take the store's owner lock (SqliteStore::Open): one may
// read while a coordinator serves the same file (SQLite's write-ahead log
// gives it the last committed state).
//
// Thread-safe. The object must outlive the channels made from it.
#ifndef SMALLEM_SERVER_SERVICE_READ_ONLY_COORDINATOR_H_
#define SMALLEM_SERVER_SERVICE_READ_ONLY_COORDINATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/store/sqlite_store.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace smallem {

class ClientServiceImpl;

class ReadOnlyCoordinator {
 public:
  // Opens `db_path` read-only (SqliteStore::OpenReadOnly's errors) and
  // starts the in-process server.
  static absl::StatusOr<std::unique_ptr<ReadOnlyCoordinator>> Open(const std::string& db_path);
  ~ReadOnlyCoordinator();

  // A channel to the service, for v1::ClientService::NewStub.
  std::shared_ptr<grpc::Channel> channel() const;

 private:
  ReadOnlyCoordinator() = default;

  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobQueue> queue_;  // its reaper never runs
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<ClientServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_READ_ONLY_COORDINATOR_H_
