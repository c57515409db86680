#include "worker/job_dirs.h"

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

}  // namespace

JobDirs::JobDirs(std::string cache_dir, int max_kept_failed)
    : jobs_dir_(std::move(cache_dir) + "/jobs"), max_kept_failed_(std::max(0, max_kept_failed)) {}

absl::StatusOr<std::string> JobDirs::Create(int64_t run_id, int attempt) {
  const std::string dir = absl::StrCat(jobs_dir_, "/run-", run_id, "-attempt-", attempt);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a leftover of a daemon killed while running it
  ec.clear();
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return dir;
}

void JobDirs::Remove(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) spdlog::warn("cannot remove the job directory {}: {}", dir, ec.message());
}

std::string JobDirs::KeepFailed(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  const std::string target = absl::StrCat(failed_dir(), "/", fs::path(dir).filename().string());
  std::error_code ec;
  fs::create_directories(failed_dir(), ec);
  if (!ec) fs::remove_all(target, ec);
  if (!ec) fs::rename(dir, target, ec);
  // Its age in failed/ is when it failed, whatever the files inside say.
  if (!ec) fs::last_write_time(target, fs::file_time_type::clock::now(), ec);
  std::string kept = target;
  if (ec) {
    spdlog::warn("cannot move the failed job's directory {} to {}: {}", dir, failed_dir(),
                 ec.message());
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
