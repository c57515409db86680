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

namespace {

// FailedPrecondition naming the first row whose reference dangles.
absl::Status CheckForeignKeys(SqliteDb& db) {
  absl::StatusOr<SqliteStatement> check = db.Prepare("PRAGMA foreign_key_check");
  if (!check.ok()) return check.status();
  absl::StatusOr<bool> row = check->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("row ", check->ColumnInt(1), " of table ", check->ColumnText(0),
                   " refers to a missing row of ", check->ColumnText(2)));
}

// Applies `m` and sets user_version to its version, in one transaction.
absl::Status ApplyOne(SqliteDb& db, const Migration& m) {
  absl::StatusOr<SqliteTransaction> txn = SqliteTransaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::Status status = db.Exec(m.sql);
  if (status.ok()) status = CheckForeignKeys(db);
  // user_version lives in the database header, written by this same
  // transaction: the schema and its number change together.
  if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", m.version));
  if (status.ok()) status = txn->Commit();
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("migration ", std::string(m.name), ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace

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
  if (*version == newest) return absl::OkStatus();
  // Rebuilding a table other tables reference (SQLite's way to change a
  // constraint) needs foreign keys off, which only takes effect outside a
  // transaction; each migration proves them intact before it commits.
  if (absl::Status off = db.Exec("PRAGMA foreign_keys = OFF"); !off.ok()) return off;
  absl::Status status = absl::OkStatus();
  for (int v = *version + 1; v <= newest && status.ok(); ++v) {
    status = ApplyOne(db, migrations[v - 1]);
  }
  absl::Status on = db.Exec("PRAGMA foreign_keys = ON");
  return status.ok() ? on : status;
}

}  // namespace smallem
