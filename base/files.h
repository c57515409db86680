// Whole files: the one reader and the one durable writer every library uses
// (tests/structure/check_durable_writes.sh fails on a file written or renamed
// any other way outside this file).
//
// WriteFileDurably replaces a file so that a reader, or the machine after a
// crash or a power loss, finds either the old contents or the new, never a
// mix and never a truncated file: it writes a temporary file in the same
// directory, fsyncs it, renames it over the path and fsyncs the directory
// (LevelDB's recipe). A failure at any step removes the temporary.
//
// Every failure is an absl::Status whose message names the path and gives
// the system's reason ("No such file or directory"); its code follows errno
// (absl::ErrnoToStatus): NotFound for a missing file or directory,
// PermissionDenied, ResourceExhausted for a full disk, ...
//
// Thread-safe: the functions share no state. Concurrent writers of one path
// each use their own temporary; the last rename wins.
#ifndef SMALLEM_BASE_FILES_H_
#define SMALLEM_BASE_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace smallem {

// The whole contents of the file at `path`. NotFound when it does not exist;
// FailedPrecondition when it is a directory; another errno-derived code when
// it cannot be opened or read.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Makes `contents` the contents of `path`, durably and atomically (above).
// The directory must exist (NotFound otherwise). A new file gets mode 0666
// less the umask. On failure `path` is unchanged and no temporary is left.
absl::Status WriteFileDurably(const std::string& path, std::string_view contents);

// The same for contents given in pieces, written one after the other without
// joining them in memory (a weights file's header and its tensors).
absl::Status WriteFileDurably(const std::string& path,
                              const std::vector<std::string_view>& pieces);

// Renames the file or directory `from` to `to` (rename(2): atomic, replacing
// a file or an empty directory at `to`) and fsyncs the directories holding
// both names, so the new name survives a crash. The way to publish a
// directory built under a temporary name (a downloaded dataset, an unpacked
// corpus). An errno-derived error naming both paths otherwise; `from` is
// then unchanged.
absl::Status RenameDurably(const std::string& from, const std::string& to);

// Writes `data` at byte `offset` of the file at `path`, creating it (mode
// 0666 less the umask) when it does not exist, for a file that arrives in
// chunks in any order (a download). Not atomic and not synced: the caller
// writes into a temporary directory, syncs each file (SyncToDisk) and
// publishes the directory with RenameDurably. An errno-derived error naming
// the path otherwise (ResourceExhausted for a full disk).
absl::Status WriteFileChunk(const std::string& path, int64_t offset, std::string_view data);

// Flushes the file or directory at `path` to disk (fsync), for what was
// written some other way and must survive a crash: a download written in
// chunks before its directory is renamed into place, the directory holding
// a rename. An errno-derived error naming the path otherwise (NotFound when
// it does not exist); a file system that cannot sync a directory is not an
// error.
absl::Status SyncToDisk(const std::string& path);

}  // namespace smallem

#endif  // SMALLEM_BASE_FILES_H_
