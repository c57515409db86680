#include "cli/session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/store/sqlite_store.h"

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

absl::Status ForSession(const absl::Status& status, const ServiceArgs& args) {
  if (args.db.empty() || !absl::IsNotFound(status) ||
      !absl::StrContains(status.message(), kListExperimentsHint)) {
    return status;
  }
  return absl::NotFoundError(absl::StrReplaceAll(
      status.message(),
      {{"`smallemctl status --all`", absl::StrCat("`smallemctl status --db ", args.db, " --all`")}}));
}

}  // namespace smallem::cli
