// smallem-coordinator: parses flags and calls RunCoordinator; nothing else.
#include <string>

#include "CLI/CLI.hpp"
#include "server/coordinator.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  smallem::CoordinatorOptions options;
  std::string log_level = "info";
  CLI::App app{"smallem-coordinator — stores experiments and hands runs to workers."};
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
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  return smallem::RunCoordinator(options);
}
