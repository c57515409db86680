#include "cli/session.h"

#include "absl/strings/str_cat.h"

namespace smallem::cli {

absl::StatusOr<Session> OpenSession(const ServiceArgs& args) {
  Session session;
  const absl::Duration deadline = absl::Seconds(args.deadline_s);
  if (args.db.empty()) {
    session.client = std::make_unique<ServiceClient>(
        args.coordinator.empty() ? DefaultCoordinatorAddress() : args.coordinator, deadline,
        args.token_file, args.tls_ca);
    return session;
  }
  absl::StatusOr<std::unique_ptr<ReadOnlyCoordinator>> local = ReadOnlyCoordinator::Open(args.db);
  if (absl::IsNotFound(local.status())) {
    return absl::NotFoundError(absl::StrCat(
        "--db ", args.db, ": no such database file (`smallemctl run GRID --db ", args.db,
        "` writes one; a coordinator's is its --db)"));
  }
  if (!local.ok()) return local.status();
  session.local = *std::move(local);
  session.client = std::make_unique<ServiceClient>(session.local->channel(),
                                                   absl::StrCat("--db ", args.db), deadline);
  return session;
}

}  // namespace smallem::cli
