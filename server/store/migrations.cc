#include "server/store/migrations.h"

#include "absl/strings/str_cat.h"

namespace smallem {

absl::StatusOr<int> SchemaVersion(SqliteDb& db) {
  absl::StatusOr<SqliteStatement> stmt = db.Prepare("PRAGMA user_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? static_cast<int>(stmt->ColumnInt(0)) : 0;
}

absl::Status ApplyMigrations(SqliteDb& db, const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", std::string(migrations[i].name), " should be numbered ", i + 1,
          " (migrations are numbered 0001, 0002, ... without gaps)"));
    }
  }
  absl::StatusOr<int> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  const int newest = static_cast<int>(migrations.size());
  if (*version > newest) {
    return absl::FailedPreconditionError(absl::StrCat(
        db.path(), " has schema version ", *version, " but this coordinator knows only up to ",
        newest, "; run a newer smallem-coordinator"));
  }
  for (int v = *version + 1; v <= newest; ++v) {
    const Migration& m = migrations[v - 1];
    absl::StatusOr<SqliteTransaction> txn = SqliteTransaction::Begin(db);
    if (!txn.ok()) return txn.status();
    absl::Status status = db.Exec(m.sql);
    // user_version lives in the database header, written by this same
    // transaction: the schema and its number change together.
    if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", v));
    if (status.ok()) status = txn->Commit();
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("migration ", std::string(m.name), ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace smallem
