// Schema migrations: the numbered files of migrations/ (NNNN_name.sql),
// embedded into the binary at build time, applied in order, one transaction
// each, the schema's version kept in PRAGMA user_version. Applied files are
// never edited; a change is a new file.
#ifndef SMALLEM_SERVER_STORE_MIGRATIONS_H_
#define SMALLEM_SERVER_STORE_MIGRATIONS_H_

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/sqlite.h"

namespace smallem {

struct Migration {
  int version;            // NNNN of the file name; 1, 2, 3, ... without gaps
  std::string_view name;  // file name without .sql, e.g. "0001_init"
  std::string_view sql;   // the file's text
};

// migrations/*.sql, in version order (generated: migrations_embedded.cc).
const std::vector<Migration>& EmbeddedMigrations();

// The database's schema version (PRAGMA user_version; 0 for a new file).
absl::StatusOr<int> SchemaVersion(SqliteDb& db);

// Applies every migration newer than the database's version, each in its own
// BEGIN IMMEDIATE transaction together with its user_version update, so a
// crash leaves the schema at a whole version. Foreign keys are off while
// they run (so a migration may rebuild a referenced table) and checked
// (PRAGMA foreign_key_check) before each commits. FailedPrecondition when the
// database is newer than the newest migration (an older coordinator binary)
// or the list has a gap; the failing migration's name otherwise.
absl::Status ApplyMigrations(SqliteDb& db, const std::vector<Migration>& migrations);

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_MIGRATIONS_H_
