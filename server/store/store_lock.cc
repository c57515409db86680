#include "server/store/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace smallem {
namespace {

// The pid holding a flock on the file `fd` is open on, as /proc/locks lists
// it ("1: FLOCK  ADVISORY  WRITE 1310 fe:00:10954660 0 EOF"); 0 when it does
// not say (another system, another pid namespace).
int64_t FlockHolder(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  const std::string file = absl::StrFormat("%02x:%02x:%u", major(st.st_dev), minor(st.st_dev),
                                           static_cast<uint64_t>(st.st_ino));
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, kind, advisory, mode, where;
    int64_t pid = 0;
    if (!(fields >> number >> kind)) continue;
    if (kind == "->") continue;  // a waiter, not a holder
    if (!(fields >> advisory >> mode >> pid >> where)) continue;
    if (kind == "FLOCK" && where == file && pid > 0) return pid;
  }
  return 0;
}

}  // namespace

absl::StatusOr<StoreLock> StoreLock::Acquire(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("open ", path));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const int64_t holder = error == EWOULDBLOCK ? FlockHolder(fd) : 0;
    close(fd);
    if (error != EWOULDBLOCK) return absl::ErrnoToStatus(error, absl::StrCat("lock ", path));
    return absl::UnavailableError(absl::StrCat(
        "the database ", path, " is in use: another coordinator or `smallemctl run` owns it",
        holder > 0 ? absl::StrCat(" (pid ", holder, ")") : "",
        "; stop that one first, or give another --db (to read it meanwhile: `smallemctl report "
        "EXPERIMENT --db ", path, "`)"));
  }
  return StoreLock(fd);
}

StoreLock& StoreLock::operator=(StoreLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) close(fd_);  // the lock goes with the descriptor
}

}  // namespace smallem
