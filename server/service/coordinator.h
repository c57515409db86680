// Coordinator: the whole coordinator in one object — the SQLite store, the
// job queue and its reaper, the worker registry and both gRPC services on
// one listening port. smallem-coordinator runs one until a signal;
// `smallemctl run` and the tests embed one on 127.0.0.1:0.
//
// Thread-safe. Shutdown (or destruction) stops accepting calls, lets the ones
// in flight finish for a moment, then stops the reaper.
#ifndef SMALLEM_SERVER_SERVICE_COORDINATOR_H_
#define SMALLEM_SERVER_SERVICE_COORDINATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "rpc/auth.h"
#include "rpc/limits.h"
#include "server/http/dashboard_api.h"
#include "server/http/dashboard_server.h"
#include "server/http/rpc_metrics.h"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/service/stream_gate.h"
#include "server/store/sqlite_store.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace smallem {

class ClientServiceImpl;
class WorkerServiceImpl;

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7070";  // host:port; port 0 picks a free port
  std::string db_path = "smallem.db";
  JobQueueOptions queue;
  const Clock* clock = nullptr;  // nullptr = SystemClock
  bool reaper = true;            // run the background reaper
  ServerSecurity security;       // tokens and TLS; none = open plaintext (rpc/auth.h)
  // Dataset and checkpoint uploads that would leave less free disk than
  // this next to the database, counting every upload in flight, are
  // refused (server/service/disk_reserve.h).
  int64_t min_free_disk_bytes = 1'000'000'000;  // 1 GB
  // StreamMetrics calls that follow a run, open at once at most (each holds
  // a server thread); one more gets RESOURCE_EXHAUSTED.
  int max_following_streams = 64;
  // How long one Backup may take, copy and transfer, before the server
  // ends it (DEADLINE_EXCEEDED; its copy is removed).
  absl::Duration backup_deadline = absl::Hours(1);
  // UploadCheckpoint, FetchCheckpoint, UploadDataset and Backup streams:
  // at most so many of each open at once (each holds a server thread; one
  // more gets RESOURCE_EXHAUSTED), each ended by the server after so long
  // without a chunk read or written (server/service/stream_gate.h).
  StreamLimits transfer_streams;
  // host:port of the web dashboard, its JSON endpoints and /metrics
  // (docs/dashboard.md); "" = none. It requires the client token when there
  // is one and serves HTTPS with the TLS certificate when there is one.
  std::string http_listen;
};

class Coordinator {
 public:
  // Opens (and migrates) the database, starts the reaper, the server and
  // the dashboard (when options.http_listen is set). Errors of
  // SqliteStore::Open and DashboardServer::Start; Unavailable when the
  // address cannot be bound (or, with TLS, the certificate and key do not
  // make a pair). Logs a warning when a non-loopback address leaves a
  // service without a token, or sends tokens without TLS.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);
  ~Coordinator();

  // The bound port (the real one when options.listen asked for port 0).
  int port() const { return port_; }
  // "127.0.0.1:<port>" (the listen host with the bound port): where clients
  // and workers on this machine connect. With TLS, the certificate must name
  // this host.
  const std::string& address() const { return address_; }
  // The address as bound: the listen host with the bound port
  // ("0.0.0.0:7070" for --listen 0.0.0.0:7070): what the log states.
  const std::string& bound_address() const { return bound_address_; }

  // Where a browser on this machine opens the dashboard ("" without one).
  std::string dashboard_url() const { return dashboard_ ? dashboard_->url() : ""; }

  SqliteStore& store() { return *store_; }
  JobQueue& queue() { return *queue_; }

  // Stops the server (in-flight calls get up to `grace_ms`) and the reaper.
  // Idempotent.
  void Shutdown(int64_t grace_ms = 1000);

 private:
  Coordinator() = default;

  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<ClientServiceImpl> client_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  RpcMetrics rpc_metrics_;
  std::unique_ptr<DashboardApi> dashboard_api_;
  std::unique_ptr<DashboardServer> dashboard_;
  int port_ = 0;
  std::string address_;
  std::string bound_address_;
  bool shut_down_ = false;
};

// Runs SqliteStore::DecideLooks on every experiment with sequential seeds
// (the store's planner set): the decisions a crash interrupted. Returns how
// many were taken; an experiment whose decision fails is logged and left.
absl::StatusOr<int> DecidePendingLooks(SqliteStore& store, const Clock& clock);

// smallem-coordinator's body: starts a Coordinator, logs where it listens,
// serves until SIGINT or SIGTERM, then shuts down. Returns the exit code.
int RunCoordinator(const CoordinatorOptions& options);

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_COORDINATOR_H_
