// StoreLock: the one owner of a database file. A coordinator (or
// `smallemctl run`'s embedded one) writes its store as if alone — its
// queue, leases and group commit assume nobody else changes the runs — so
// a second owner of the same file is refused, as a second coordinator on
// the same port is. Readers (SqliteStore::OpenReadOnly) take no lock.
//
// The lock is flock(2) on the database file itself, held for the owner's
// lifetime and released by the kernel when its process ends, however it
// ends: nothing is left behind to clean up. SQLite's own locks are fcntl
// byte ranges, which flock does not touch; the lock's descriptor must be
// closed only after the owner's SQLite connection (closing a descriptor of
// a file drops every fcntl lock the process holds on it).
//
// Not thread-safe; movable, not copyable.
#ifndef SMALLEM_SERVER_STORE_STORE_LOCK_H_
#define SMALLEM_SERVER_STORE_STORE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace smallem {

class StoreLock {
 public:
  // Takes the exclusive lock on `path`, creating an empty file when there is
  // none (SQLite reads an empty file as a new database). Unavailable naming
  // the file (and the owner's pid when the system says) when another
  // process — or another owner in this one — holds it; the file system's
  // error when it cannot be opened.
  static absl::StatusOr<StoreLock> Acquire(const std::string& path);

  StoreLock(StoreLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  StoreLock& operator=(StoreLock&& other) noexcept;
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  ~StoreLock();  // releases the lock

 private:
  explicit StoreLock(int fd) : fd_(fd) {}

  int fd_ = -1;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_STORE_LOCK_H_
