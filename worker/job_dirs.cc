#include "worker/job_dirs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "spdlog/spdlog.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

constexpr char kLockName[] = ".lock";

// An exclusive flock on path: the open descriptor, or −1 when the file is
// missing or another open file description holds the lock.
int TryLock(const std::string& path, int extra_flags) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

JobDirs::JobDirs(std::string cache_dir, int max_kept_failed)
    : jobs_dir_(std::move(cache_dir) + "/jobs"), max_kept_failed_(std::max(0, max_kept_failed)) {}

JobDirs::~JobDirs() {
  absl::MutexLock lock(&locks_mu_);
  for (const auto& [dir, fd] : locks_) close(fd);
}

absl::StatusOr<std::string> JobDirs::Create(int64_t run_id, int attempt) {
  const std::string dir = absl::StrCat(jobs_dir_, "/run-", run_id, "-attempt-", attempt);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a leftover of a daemon killed while running it
  ec.clear();
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  // Locked under a temporary name, then renamed: a `.lock` that a sweeping
  // sibling can see is always already held.
  const std::string staging = absl::StrCat(dir, "/", kLockName, ".new");
  const int fd = TryLock(staging, O_CREAT);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot lock ", dir, ": ", std::strerror(errno)));
  }
  if (absl::Status renamed = RenameDurably(staging, dir + "/" + kLockName); !renamed.ok()) {
    close(fd);
    return absl::Status(renamed.code(),
                        absl::StrCat("cannot lock ", dir, ": ", renamed.message()));
  }
  absl::MutexLock lock(&locks_mu_);
  locks_[dir] = fd;
  return dir;
}

void JobDirs::Unlock(const std::string& dir) {
  absl::MutexLock lock(&locks_mu_);
  auto it = locks_.find(dir);
  if (it == locks_.end()) return;
  close(it->second);
  locks_.erase(it);
}

void JobDirs::Remove(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) spdlog::warn("cannot remove the job directory {}: {}", dir, ec.message());
  Unlock(dir);
}

std::string JobDirs::KeepFailed(const std::string& dir) {
  std::string kept;
  {
    absl::MutexLock lock(&mu_);
    kept = MoveToFailedLocked(dir);
  }
  Unlock(dir);
  return kept;
}

int JobDirs::SweepAbandoned(absl::Duration unlocked_grace) {
  std::vector<std::string> abandoned;
  std::vector<int> held;  // their locks, kept until they are moved
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(jobs_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, "run-") || !it->is_directory(entry_ec)) continue;
    const std::string dir = it->path().string();
    const std::string lock_path = dir + "/" + kLockName;
    if (fs::exists(lock_path, entry_ec)) {
      const int fd = TryLock(lock_path, 0);
      if (fd < 0) continue;  // its daemon is alive
      held.push_back(fd);
      abandoned.push_back(dir);
      continue;
    }
    const fs::file_time_type modified = fs::last_write_time(dir, entry_ec);
    if (!entry_ec && now - modified > absl::ToChronoSeconds(unlocked_grace)) {
      abandoned.push_back(dir);
    }
  }
  int moved = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& dir : abandoned) {
      const std::string kept = MoveToFailedLocked(dir);
      if (kept != dir) ++moved;
    }
  }
  for (int fd : held) close(fd);
  if (moved > 0) {
    spdlog::info("moved {} job director{} whose daemon had died to {}", moved,
                 moved == 1 ? "y" : "ies", failed_dir());
  }
  return moved;
}

std::string JobDirs::MoveToFailedLocked(const std::string& dir) {
  const std::string target = absl::StrCat(failed_dir(), "/", fs::path(dir).filename().string());
  std::error_code ec;
  fs::create_directories(failed_dir(), ec);
  if (!ec) fs::remove_all(target, ec);
  absl::Status moved = ec ? absl::InternalError(ec.message()) : RenameDurably(dir, target);
  // Its age in failed/ is when it failed, whatever the files inside say.
  if (moved.ok()) fs::last_write_time(target, fs::file_time_type::clock::now(), ec);
  std::string kept = target;
  if (!moved.ok()) {
    spdlog::warn("cannot move the failed job's directory {} to {}: {}", dir, failed_dir(),
                 std::string(moved.message()));
    kept = dir;
  }
  PruneFailedLocked();
  return fs::exists(kept, ec) ? kept : "";
}

void JobDirs::PruneFailedLocked() {
  struct Entry {
    fs::file_time_type time;
    std::string path;
  };
  std::vector<Entry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(failed_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec)) continue;
    const fs::file_time_type time = fs::last_write_time(it->path(), entry_ec);
    if (entry_ec) continue;  // removed meanwhile by a daemon sharing the cache
    entries.push_back(Entry{time, it->path().string()});
  }
  if (entries.size() <= static_cast<size_t>(max_kept_failed_)) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.time != b.time ? a.time < b.time : a.path < b.path;
  });
  const size_t excess = entries.size() - max_kept_failed_;
  for (size_t i = 0; i < excess; ++i) {
    std::error_code remove_ec;
    fs::remove_all(entries[i].path, remove_ec);
    if (remove_ec) {
      spdlog::warn("cannot remove the old failed job directory {}: {}", entries[i].path,
                   remove_ec.message());
    }
  }
}

}  // namespace smallem
