// SqliteDb: one SQLite connection with the coordinator's settings (WAL,
// synchronous=FULL, foreign keys, a busy timeout), a cache of prepared
// statements, and write transactions that start with BEGIN IMMEDIATE.
//
// Every SQLite error becomes an absl::Status here, and only here:
// SQLITE_BUSY/LOCKED → Unavailable (retry later), SQLITE_FULL →
// ResourceExhausted, SQLITE_CORRUPT/NOTADB → DataLoss, SQLITE_CONSTRAINT →
// AlreadyExists, anything else → Internal; each message names the statement.
//
// Not thread-safe: one caller at a time (SqliteStore holds a mutex).
#ifndef SMALLEM_SERVER_STORE_SQLITE_H_
#define SMALLEM_SERVER_STORE_SQLITE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;
struct sqlite3_backup;

namespace smallem {

// A prepared statement borrowed from SqliteDb's cache. Bind parameters
// (1-based), Step through rows, read columns (0-based). On destruction the
// statement is reset and its bindings cleared, ready for the next borrower.
// Text and blob columns are copied out; views are not kept past Step.
class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&&) = delete;
  ~SqliteStatement();

  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, int value) { return Bind(index, int64_t{value}); }
  SqliteStatement& Bind(int index, double value);
  SqliteStatement& Bind(int index, std::string_view text);  // copied (TEXT)
  SqliteStatement& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  SqliteStatement& Bind(int index, const std::string& text) { return Bind(index, std::string_view(text)); }
  SqliteStatement& BindBlob(int index, std::string_view bytes);  // copied (BLOB)
  SqliteStatement& BindNull(int index);

  // true: a row is ready to read; false: the statement is done.
  absl::StatusOr<bool> Step();
  // Steps to completion, ignoring rows (INSERT/UPDATE/DELETE).
  absl::Status Run();

  int64_t ColumnInt(int i) const;
  double ColumnDouble(int i) const;
  std::string ColumnText(int i) const;  // "" for NULL
  std::string ColumnBlob(int i) const;
  bool ColumnIsNull(int i) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  absl::Status bind_error_;  // first failed Bind, reported by Step
};

class SqliteDb {
 public:
  // Opens (creating) the database file at `path` and applies the connection
  // settings. Unavailable/DataLoss/Internal when the file cannot be opened or
  // is not a database.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  // Opens the existing database at `path` for reading only (a reader beside
  // the coordinator that owns it, or with none): no file is created, the
  // journal mode is left as it is, and every write fails (PermissionDenied).
  // NotFound when there is no file at `path`; otherwise as Open.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> OpenReadOnly(const std::string& path);
  ~SqliteDb();

  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements with no parameters (schema, pragmas).
  absl::Status Exec(std::string_view sql);
  // A cached prepared statement for `sql` (keyed by its text). The returned
  // statement must be destroyed before the next Prepare of the same text.
  absl::StatusOr<SqliteStatement> Prepare(std::string_view sql);

  int64_t LastInsertRowId() const;
  int64_t Changes() const;  // rows changed by the last statement
  const std::string& path() const { return path_; }

 private:
  friend class SqliteBackup;
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

// An online copy of a database into a new file, made a few pages at a time
// with SQLite's backup API: between two Steps the source connection is free
// for other statements, and what they write through it reaches the copy
// too (SQLite updates a backup from its source connection's writes), so
// the finished copy is the state after the last committed transaction.
// The file is created owner-only (0600) and removed again unless Check
// succeeds.
//
// Not thread-safe. Start, Step and End use the source connection: they
// need whatever guards it (SqliteStore's lock); Check does not. End must
// be called before destruction, after success or not.
class SqliteBackup {
 public:
  // Creates `path` (AlreadyExists when it exists) and starts the copy of
  // `source`'s database into it.
  static absl::StatusOr<std::unique_ptr<SqliteBackup>> Start(SqliteDb& source,
                                                             const std::string& path);
  ~SqliteBackup();
  SqliteBackup(const SqliteBackup&) = delete;
  SqliteBackup& operator=(const SqliteBackup&) = delete;

  // Copies up to `pages` more pages; true when the copy is whole.
  absl::StatusOr<bool> Step(int pages);
  // Pages still to copy, and in all, as of the last Step.
  int remaining_pages() const;
  int total_pages() const;
  // Lets go of the source. Idempotent.
  absl::Status End();
  // Checks the whole copy (PRAGMA integrity_check: DataLoss when it fails)
  // and closes it, synced; from then on the file is the caller's.
  // REQUIRES: End returned OK after a Step returned true.
  absl::Status Check();

 private:
  explicit SqliteBackup(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  sqlite3* copy_ = nullptr;
  sqlite3_backup* backup_ = nullptr;
  bool kept_ = false;
};

// A write transaction: BEGIN IMMEDIATE in Begin, COMMIT in Commit, ROLLBACK
// on destruction when not committed (an error path returned early).
class SqliteTransaction {
 public:
  static absl::StatusOr<SqliteTransaction> Begin(SqliteDb& db);
  SqliteTransaction(SqliteTransaction&& other) noexcept
      : db_(other.db_), done_(other.done_) { other.done_ = true; }
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  ~SqliteTransaction();

  // Durable once this returns OK (synchronous=FULL).
  absl::Status Commit();

 private:
  explicit SqliteTransaction(SqliteDb& db) : db_(&db) {}
  SqliteDb* db_;
  bool done_ = false;
};

// Converts an SQLite result code into a Status; `what` says what was being
// done ("step: UPDATE runs ..."). OK for SQLITE_OK/ROW/DONE.
absl::Status SqliteStatus(sqlite3* db, int code, std::string_view what);

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_SQLITE_H_
