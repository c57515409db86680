// SqliteStore: prepared datasets, stored by content hash as file chunks.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/sqlite_store.h"

namespace smallem {

absl::StatusOr<std::optional<int64_t>> SqliteStore::DatasetBytes(std::string_view content_hash) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT total_bytes FROM datasets WHERE content_hash = ? "
                                "AND complete = 1"));
  s.Bind(1, content_hash);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return std::optional<int64_t>();
  return std::optional<int64_t>(s.ColumnInt(0));
}

absl::Status SqliteStore::PutDatasetChunk(std::string_view content_hash,
                                          const DatasetChunkRef& where, std::string_view data,
                                          int64_t now_ms) {
  return Write([&]() -> absl::Status {
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT complete FROM datasets WHERE content_hash = ?"));
    s.Bind(1, content_hash);
    ASSIGN_OR_RETURN(bool found, s.Step());
    if (found && s.ColumnInt(0) == 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset ", std::string(content_hash), " is already complete"));
    }
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT OR IGNORE INTO datasets (content_hash, "
                                  "created_unix_ms) VALUES (?, ?)"));
    s.Bind(1, content_hash).Bind(2, now_ms);
    RETURN_IF_ERROR(s.Run());
  }
  {
    // A chunk once written is never replaced: otherwise a second upload of
    // the same hash could swap a file after the first one was verified.
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT file_size, data FROM dataset_chunks WHERE "
                                  "content_hash = ? AND file_name = ? AND file_offset = ?"));
    s.Bind(1, content_hash).Bind(2, where.file_name).Bind(3, where.offset);
    ASSIGN_OR_RETURN(bool stored, s.Step());
    if (stored) {
      if (s.ColumnInt(0) == where.file_size && s.ColumnBlob(1) == data) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset ", std::string(content_hash), ": ", where.file_name, " already holds other "
          "bytes at offset ", where.offset, " (a stored chunk is never replaced; is another "
          "upload of this dataset under way? send it again once it has finished)"));
    }
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("INSERT INTO dataset_chunks (content_hash, "
                                  "file_name, file_offset, file_size, data) "
                                  "VALUES (?, ?, ?, ?, ?)"));
    s.Bind(1, content_hash).Bind(2, where.file_name).Bind(3, where.offset)
        .Bind(4, where.file_size).BindBlob(5, data);
    RETURN_IF_ERROR(s.Run());
  }
  return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<DatasetChunkRef>> SqliteStore::ListDatasetChunks(
    std::string_view content_hash) {
  absl::MutexLock lock(&db_mu_);
  return ListDatasetChunksLocked(content_hash);
}

absl::StatusOr<std::vector<DatasetChunkRef>> SqliteStore::ListDatasetChunksLocked(
    std::string_view content_hash) {
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT file_name, file_size, file_offset, length(data) "
                                "FROM dataset_chunks WHERE content_hash = ? "
                                "ORDER BY file_name, file_offset"));
  s.Bind(1, content_hash);
  std::vector<DatasetChunkRef> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(DatasetChunkRef{.file_name = s.ColumnText(0), .file_size = s.ColumnInt(1),
                                  .offset = s.ColumnInt(2), .length = s.ColumnInt(3)});
  }
  return out;
}

absl::StatusOr<std::string> SqliteStore::ReadDatasetChunk(std::string_view content_hash,
                                                          std::string_view file_name,
                                                          int64_t offset) {
  absl::MutexLock lock(&db_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("SELECT data FROM dataset_chunks WHERE content_hash = ? "
                                "AND file_name = ? AND file_offset = ?"));
  s.Bind(1, content_hash).Bind(2, file_name).Bind(3, offset);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("dataset ", std::string(content_hash), " has no chunk of ",
                                            std::string(file_name), " at offset ", offset));
  }
  return s.ColumnBlob(0);
}

namespace {

bool SameChunks(const std::vector<DatasetChunkRef>& a, const std::vector<DatasetChunkRef>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].file_name != b[i].file_name || a[i].file_size != b[i].file_size ||
        a[i].offset != b[i].offset || a[i].length != b[i].length) {
      return false;
    }
  }
  return true;
}

}  // namespace

int64_t SqliteStore::DatasetDrops() {
  absl::MutexLock lock(&db_mu_);
  return dataset_drops_;
}

absl::Status SqliteStore::CompleteDataset(std::string_view content_hash,
                                          const std::vector<DatasetChunkRef>& verified,
                                          int64_t drops_before) {
  return Write([&]() -> absl::Status {
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("SELECT complete FROM datasets WHERE content_hash = ?"));
    s.Bind(1, content_hash);
    ASSIGN_OR_RETURN(bool found, s.Step());
    if (!found) {
      return absl::NotFoundError(
          absl::StrCat("no dataset ", std::string(content_hash), " was uploaded"));
    }
    if (s.ColumnInt(0) == 1) return absl::OkStatus();
  }
  // Chunks are never replaced, and none was dropped since the caller listed
  // them, so the same list holds the same bytes: what the caller verified
  // is what becomes complete.
  ASSIGN_OR_RETURN(std::vector<DatasetChunkRef> now, ListDatasetChunksLocked(content_hash));
  if (dataset_drops_ != drops_before || !SameChunks(now, verified)) {
    return absl::AbortedError(absl::StrCat(
        "dataset ", std::string(content_hash), " changed while it was being verified (another "
        "upload of it is under way or failed); send it again"));
  }
  int64_t total_bytes = 0;
  for (const DatasetChunkRef& c : verified) total_bytes += c.length;
  ASSIGN_OR_RETURN(SqliteStatement s,
                   db_->Prepare("UPDATE datasets SET complete = 1, total_bytes = ? "
                                "WHERE content_hash = ?"));
  s.Bind(1, total_bytes).Bind(2, content_hash);
  return s.Run();
  });
}

absl::Status SqliteStore::DeleteIncompleteDataset(std::string_view content_hash) {
  return Write([&]() -> absl::Status {
  ++dataset_drops_;
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("DELETE FROM dataset_chunks WHERE content_hash = ? AND "
                                  "content_hash IN (SELECT content_hash FROM datasets "
                                  "WHERE complete = 0)"));
    s.Bind(1, content_hash);
    RETURN_IF_ERROR(s.Run());
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db_->Prepare("DELETE FROM datasets WHERE content_hash = ? AND complete = 0"));
    s.Bind(1, content_hash);
    RETURN_IF_ERROR(s.Run());
  }
  return absl::OkStatus();
  });
}

absl::StatusOr<int> SqliteStore::DeleteIncompleteDatasets() {
  int dropped = 0;
  RETURN_IF_ERROR(Write([&]() -> absl::Status {
    ++dataset_drops_;
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       db_->Prepare("DELETE FROM dataset_chunks WHERE content_hash IN "
                                    "(SELECT content_hash FROM datasets WHERE complete = 0)"));
      RETURN_IF_ERROR(s.Run());
    }
    ASSIGN_OR_RETURN(SqliteStatement s, db_->Prepare("DELETE FROM datasets WHERE complete = 0"));
    RETURN_IF_ERROR(s.Run());
    dropped = static_cast<int>(db_->Changes());
    return absl::OkStatus();
  }));
  return dropped;
}

}  // namespace smallem
