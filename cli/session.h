// Session: what a service verb talks to — a coordinator over gRPC
// (--coordinator, the default), or with --db FILE that database opened
// read-only behind an in-process client service (ReadOnlyCoordinator), so
// that `smallemctl report --db smallem.db` needs no server to be started.
#ifndef SMALLEM_CLI_SESSION_H_
#define SMALLEM_CLI_SESSION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cli/service_client.h"
#include "cli/service_commands.h"
#include "server/service/read_only_coordinator.h"

namespace smallem::cli {

struct Session {
  std::unique_ptr<ReadOnlyCoordinator> local;  // with --db; declared first: outlives client
  std::unique_ptr<ServiceClient> client;
};

// With args.db: opens it read-only (NotFound naming the flag when there is
// no such file; SqliteStore::OpenReadOnly's errors otherwise). Without: a
// client of args.coordinator (or the default), which fails on its first
// call when the coordinator cannot be reached.
absl::StatusOr<Session> OpenSession(const ServiceArgs& args);

// `status` as the user should read it in this session: with args.db, a
// NotFound that ends with the store's kListExperimentsHint names the
// command that lists that database's experiments (`smallemctl status --db
// FILE --all`), since the bare one would ask a coordinator. Anything else is
// returned as it is.
absl::Status ForSession(const absl::Status& status, const ServiceArgs& args);

}  // namespace smallem::cli

#endif  // SMALLEM_CLI_SESSION_H_
