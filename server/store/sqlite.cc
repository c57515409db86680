#include "server/store/sqlite.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace smallem {
namespace {

// Statement text shortened for messages.
std::string Abbreviate(std::string_view sql) {
  constexpr size_t kMax = 60;
  if (sql.size() <= kMax) return std::string(sql);
  return absl::StrCat(std::string(sql.substr(0, kMax)), "...");
}

}  // namespace

absl::Status SqliteStatus(sqlite3* db, int code, std::string_view what) {
  if (code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code));
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(
          absl::StrCat(message, " (the database is busy; another coordinator may hold it)"));
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(absl::StrCat(message, " (free disk space)"));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), bind_error_(std::move(other.bind_error_)) {
  other.stmt_ = nullptr;
}

SqliteStatement::~SqliteStatement() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (bind_error_.ok()) bind_error_ = SqliteStatus(db_, rc, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (bind_error_.ok()) bind_error_ = SqliteStatus(db_, rc, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view text) {
  int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8);
  if (bind_error_.ok()) bind_error_ = SqliteStatus(db_, rc, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, std::string_view bytes) {
  int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (bind_error_.ok()) bind_error_ = SqliteStatus(db_, rc, "bind");
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (bind_error_.ok()) bind_error_ = SqliteStatus(db_, rc, "bind");
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_, rc, absl::StrCat("step \"", Abbreviate(sqlite3_sql(stmt_)), "\""));
}

absl::Status SqliteStatement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int64_t SqliteStatement::ColumnInt(int i) const { return sqlite3_column_int64(stmt_, i); }
double SqliteStatement::ColumnDouble(int i) const { return sqlite3_column_double(stmt_, i); }
bool SqliteStatement::ColumnIsNull(int i) const {
  return sqlite3_column_type(stmt_, i) == SQLITE_NULL;
}

std::string SqliteStatement::ColumnText(int i) const {
  const unsigned char* text = sqlite3_column_text(stmt_, i);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, i));
}

std::string SqliteStatement::ColumnBlob(int i) const {
  const void* blob = sqlite3_column_blob(stmt_, i);
  if (blob == nullptr) return "";
  return std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, i));
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(raw, rc, absl::StrCat("open ", path));
    sqlite3_close(raw);
    return status;
  }
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  sqlite3_busy_timeout(raw, 5000);
  sqlite3_extended_result_codes(raw, 1);
  // WAL lets readers proceed during a write; synchronous=FULL makes every
  // commit durable before it is acknowledged (a worker's completion must not
  // be lost after its reply).
  absl::Status status = db->Exec(
      "PRAGMA journal_mode = WAL;"
      "PRAGMA synchronous = FULL;"
      "PRAGMA foreign_keys = ON;");
  if (!status.ok()) return status;
  // journal_mode can silently stay "memory" on odd file systems; say so.
  absl::StatusOr<SqliteStatement> mode = db->Prepare("PRAGMA journal_mode");
  if (!mode.ok()) return mode.status();
  absl::StatusOr<bool> row = mode->Step();
  if (!row.ok()) return row.status();
  if (!*row || mode->ColumnText(0) != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": cannot use write-ahead logging (journal_mode=", mode->ColumnText(0),
        "); put the database on a local file system"));
  }
  return db;
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::OpenReadOnly(const std::string& path) {
  // Without this check SQLite's "unable to open database file" would not
  // say that the file is missing (and a typo must not read as a bad file).
  if (access(path.c_str(), F_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such database file"));
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(raw, rc, absl::StrCat("open ", path, " read-only"));
    sqlite3_close(raw);
    return status;
  }
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  sqlite3_busy_timeout(raw, 5000);
  sqlite3_extended_result_codes(raw, 1);
  // A write-ahead log lets this connection read while the owner writes;
  // the owner set the mode, a reader cannot.
  if (absl::Status status = db->Exec("PRAGMA query_only = ON"); !status.ok()) return status;
  return db;
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

absl::StatusOr<std::unique_ptr<SqliteBackup>> SqliteBackup::Start(SqliteDb& source,
                                                                 const std::string& path) {
  // Created here, owner-only, so the copy of the database is never
  // readable by others, not even while it is written (SQLite gives its
  // journal the same mode).
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path, " exists; a backup writes a new file"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
  }
  close(fd);
  std::unique_ptr<SqliteBackup> b(new SqliteBackup(path));
  int rc = sqlite3_open_v2(path.c_str(), &b->copy_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  RETURN_IF_ERROR(SqliteStatus(b->copy_, rc, absl::StrCat("open ", path)));
  b->backup_ = sqlite3_backup_init(b->copy_, "main", source.db_, "main");
  if (b->backup_ == nullptr) {
    return SqliteStatus(b->copy_, sqlite3_errcode(b->copy_), absl::StrCat("backup to ", path));
  }
  return b;
}

SqliteBackup::~SqliteBackup() {
  CHECK(backup_ == nullptr) << "SqliteBackup destroyed before End";
  if (copy_ != nullptr) sqlite3_close(copy_);
  if (!kept_) {
    for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
      unlink(absl::StrCat(path_, suffix).c_str());
    }
  }
}

absl::StatusOr<bool> SqliteBackup::Step(int pages) {
  CHECK(backup_ != nullptr);
  const int rc = sqlite3_backup_step(backup_, pages);
  if (rc == SQLITE_DONE) return true;
  // BUSY or LOCKED: another connection holds the source; the next step
  // tries again.
  if (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  return SqliteStatus(copy_, rc, absl::StrCat("backup to ", path_));
}

int SqliteBackup::remaining_pages() const {
  return backup_ != nullptr ? sqlite3_backup_remaining(backup_) : 0;
}

int SqliteBackup::total_pages() const {
  return backup_ != nullptr ? sqlite3_backup_pagecount(backup_) : 0;
}

absl::Status SqliteBackup::End() {
  if (backup_ == nullptr) return absl::OkStatus();
  const int rc = sqlite3_backup_finish(backup_);
  backup_ = nullptr;
  return SqliteStatus(copy_, rc, absl::StrCat("backup to ", path_));
}

absl::Status SqliteBackup::Check() {
  CHECK(backup_ == nullptr) << "SqliteBackup::Check before End";
  sqlite3_stmt* check = nullptr;
  int rc = sqlite3_prepare_v2(copy_, "PRAGMA integrity_check", -1, &check, nullptr);
  absl::Status status = SqliteStatus(copy_, rc, "integrity_check of the backup");
  if (status.ok() && sqlite3_step(check) == SQLITE_ROW) {
    const auto* verdict = reinterpret_cast<const char*>(sqlite3_column_text(check, 0));
    if (verdict == nullptr || std::string_view(verdict) != "ok") {
      status = absl::DataLossError(absl::StrCat("the backup in ", path_, " fails its integrity "
                                                "check: ", verdict ? verdict : "?"));
    }
  }
  sqlite3_finalize(check);
  rc = sqlite3_close(copy_);
  copy_ = nullptr;
  if (status.ok()) status = SqliteStatus(nullptr, rc, absl::StrCat("close ", path_));
  kept_ = status.ok();
  return status;
}

absl::Status SqliteDb::Exec(std::string_view sql) {
  std::string text(sql);
  char* error = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (error != nullptr) sqlite3_free(error);
  return SqliteStatus(db_, rc, absl::StrCat("exec \"", Abbreviate(std::string(sql)), "\""));
}

absl::StatusOr<SqliteStatement> SqliteDb::Prepare(std::string_view sql) {
  auto it = statements_.find(std::string(sql));
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return SqliteStatus(db_, rc, absl::StrCat("prepare \"", Abbreviate(std::string(sql)), "\""));
    }
    CHECK(stmt != nullptr) << "empty statement: " << sql;
    it = statements_.emplace(std::string(sql), stmt).first;
  }
  return SqliteStatement(db_, it->second);
}

int64_t SqliteDb::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int64_t SqliteDb::Changes() const { return sqlite3_changes64(db_); }

absl::StatusOr<SqliteTransaction> SqliteTransaction::Begin(SqliteDb& db) {
  // IMMEDIATE takes the write lock now, so a conflicting writer fails here
  // (after the busy timeout) rather than at COMMIT with work half done.
  if (absl::Status status = db.Exec("BEGIN IMMEDIATE"); !status.ok()) return status;
  return SqliteTransaction(db);
}

SqliteTransaction::~SqliteTransaction() {
  if (!done_) db_->Exec("ROLLBACK").IgnoreError();
}

absl::Status SqliteTransaction::Commit() {
  CHECK(!done_) << "transaction committed twice";
  done_ = true;
  absl::Status status = db_->Exec("COMMIT");
  if (!status.ok()) db_->Exec("ROLLBACK").IgnoreError();
  return status;
}

}  // namespace smallem
