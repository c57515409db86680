// smallem-coordinator: parses flags (reading the token and certificate files
// they name) and calls RunCoordinator; nothing else.
#include <string>

#include "CLI/CLI.hpp"
#include "rpc/auth.h"
#include "server/service/coordinator.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  smallem::CoordinatorOptions options;
  smallem::ServerSecurityFiles security;
  std::string log_level = "info";
  CLI::App app{
      "smallem-coordinator — stores experiments and hands runs to workers.\n"
      "Off loopback, give both token files and a TLS certificate (docs/security.md)."};
  app.add_option("--listen", options.listen, "host:port to listen on (loopback by default)")
      ->capture_default_str();
  app.add_option("--db", options.db_path, "SQLite database file (created if missing)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--lease-ms", options.queue.lease_duration_ms,
                 "a lease outlives each heartbeat by this many milliseconds")
      ->capture_default_str();
  app.add_option("--max-runs-per-submission", options.queue.max_runs_per_submission,
                 "refuse a grid that expands to more runs than this")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  double min_free_disk_gb = 1.0;
  app.add_option("--min-free-disk-gb", min_free_disk_gb,
                 "refuse dataset uploads that would leave less free disk than this next to --db\n"
                 "(results are written there too)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--worker-token-file", security.worker_token_file,
                 "path of a file holding the token workers must send, not the token (default:\n"
                 "the token itself in $SMALLEM_WORKER_TOKEN; neither: the worker service is open)");
  app.add_option("--client-token-file", security.client_token_file,
                 "path of a file holding the token smallemctl must send, not the token (default:\n"
                 "the token itself in $SMALLEM_CLIENT_TOKEN; neither: the client service is open)");
  app.add_option("--http", options.http_listen,
                 "host:port to serve the web dashboard, its JSON and /metrics on (off by\n"
                 "default; needs the client token when there is one; docs/dashboard.md)");
  app.add_option("--tls-cert", security.tls_cert_file,
                 "PEM certificate (chain) to serve TLS with; it must name the host clients dial");
  app.add_option("--tls-key", security.tls_key_file, "PEM private key of --tls-cert");
  CLI11_PARSE(app, argc, argv);
  options.min_free_disk_bytes = static_cast<int64_t>(min_free_disk_gb * 1e9);
  spdlog::set_level(spdlog::level::from_str(log_level));
  absl::StatusOr<smallem::ServerSecurity> loaded = smallem::LoadServerSecurity(security);
  if (!loaded.ok()) {
    spdlog::error("{}", std::string(loaded.status().message()));
    return 2;
  }
  options.security = *std::move(loaded);
  return smallem::RunCoordinator(options);
}
