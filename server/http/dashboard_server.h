// DashboardServer: the coordinator's HTTP port (`smallem-coordinator --http
// HOST:PORT`): the dashboard's pages (server/http/assets/, compiled in), the
// JSON endpoints behind them (DashboardApi) and /metrics (Prometheus text).
// HTTPS with the coordinator's certificate when it has one; the client token
// guards everything when configured (server/http/dashboard_auth.h).
// docs/dashboard.md describes the pages, the endpoints and access.
//
// This is the one translation unit that compiles cpp-httplib.
//
// Thread-safe: requests are served on the server's own thread pool.
#ifndef SMALLEM_SERVER_HTTP_DASHBOARD_SERVER_H_
#define SMALLEM_SERVER_HTTP_DASHBOARD_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/http/dashboard_api.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace smallem {

class ConnectionGate;

struct DashboardOptions {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 picks a free port
  std::string client_token;  // "" = open to read, no actions
  std::string tls_cert_pem;  // "" = plain HTTP
  std::string tls_key_pem;
  // How long GET /api/changes waits for a change before answering anyway.
  absl::Duration changes_wait = absl::Seconds(10);
};

// The text of GET /metrics (or the error to answer 500 with).
using MetricsFn = std::function<absl::StatusOr<std::string>()>;

class DashboardServer {
 public:
  // Binds options.listen and starts serving on a thread of its own.
  // Unavailable when the address cannot be bound; InvalidArgument for a
  // listen address without a port, or a certificate and key that are not a
  // pair. `api` and `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(const DashboardOptions& options,
                                                                DashboardApi* api,
                                                                MetricsFn metrics);
  ~DashboardServer();

  int port() const { return port_; }
  // "http://127.0.0.1:<port>/" or "https://…": where a browser on this
  // machine opens the dashboard.
  const std::string& url() const { return url_; }

  // Stops accepting and waits for the serving thread. Idempotent.
  void Stop();

 private:
  DashboardServer() = default;
  void Route(const DashboardOptions& options, DashboardApi* api, MetricsFn metrics);

  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<ConnectionGate> gate_;  // in front of server_
  std::thread thread_;
  int port_ = 0;
  std::string url_;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_DASHBOARD_SERVER_H_
