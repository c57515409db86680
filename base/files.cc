#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace smallem {
namespace {

// Closes a descriptor when it goes out of scope.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

  // Closes now; false (errno set) when close reports an error, which for a
  // written file may be the first sign of a failed write.
  bool Close() {
    const int fd = fd_;
    fd_ = -1;
    return close(fd) == 0;
  }

 private:
  int fd_;
};

absl::Status WriteError(const std::string& path, std::string_view step, int error) {
  return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", path, step.empty() ? "" : ": ",
                                                 std::string(step)));
}

// The directory holding `path`, for fsyncing the rename.
std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Creates a new temporary file beside `path` (O_EXCL, so never another
// writer's); its descriptor, or −1 with errno set.
int CreateTemporary(const std::string& path, std::string* temporary) {
  // Unique within this process by the counter, across processes by the pid;
  // a leftover of a crashed process with the same pid is skipped.
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    *temporary = absl::StrCat(path, ".tmp-", getpid(), "-", counter.fetch_add(1));
    const int fd = open(temporary->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  FileCloser closer(fd);
  std::string contents;
  struct stat info;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    contents.reserve(static_cast<size_t>(info.st_size));
  }
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      contents.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
    }
  }
  return contents;
}

absl::Status WriteFileDurably(const std::string& path, std::string_view contents) {
  return WriteFileDurably(path, std::vector<std::string_view>{contents});
}

absl::Status WriteFileDurably(const std::string& path,
                              const std::vector<std::string_view>& pieces) {
  std::string temporary;
  const int fd = CreateTemporary(path, &temporary);
  if (fd < 0) return WriteError(path, "", errno);
  FileCloser closer(fd);
  auto fail = [&](std::string_view step) {
    const int error = errno;
    unlink(temporary.c_str());
    return WriteError(path, step, error);
  };
  for (std::string_view piece : pieces) {
    if (!WriteAll(fd, piece)) return fail("write");
  }
  // Data on disk before the name points at it: otherwise a crash after the
  // rename can leave an empty or partial file under the final name.
  if (fsync(fd) != 0) return fail("fsync");
  if (!closer.Close()) return fail("close");
  if (rename(temporary.c_str(), path.c_str()) != 0) return fail("rename");
  // The rename itself is durable only once the directory is synced.
  if (absl::Status synced = SyncToDisk(DirectoryOf(path)); !synced.ok()) {
    return absl::Status(synced.code(), absl::StrCat("cannot write ", path, ": ", synced.message()));
  }
  return absl::OkStatus();
}

absl::Status RenameDurably(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", from, " to ", to));
  }
  absl::Status synced = SyncToDisk(DirectoryOf(to));
  if (synced.ok() && DirectoryOf(from) != DirectoryOf(to)) synced = SyncToDisk(DirectoryOf(from));
  if (!synced.ok()) {
    return absl::Status(synced.code(), absl::StrCat("renamed ", from, " to ", to,
                                                    " but: ", synced.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteFileChunk(const std::string& path, int64_t offset, std::string_view data) {
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, " at offset ", offset));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return WriteError(path, "", errno);
  FileCloser closer(fd);
  while (!data.empty()) {
    const ssize_t n = pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return WriteError(path, "write", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  if (!closer.Close()) return WriteError(path, "close", errno);
  return absl::OkStatus();
}

absl::Status SyncToDisk(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path, " to sync it"));
  FileCloser closer(fd);
  // Some file systems cannot sync a directory (EINVAL); what was written
  // stands.
  if (fsync(fd) != 0 && errno != EINVAL) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot sync ", path));
  }
  return absl::OkStatus();
}

}  // namespace smallem
