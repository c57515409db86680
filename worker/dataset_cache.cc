#include "worker/dataset_cache.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "corpus/dataset.h"
#include "corpus/dataset_format.h"
#include "nlohmann/json.hpp"
#include "rpc/limits.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

bool IsHexHash(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A partial directory this old belongs to a fetch that died: a live one
// ends within FetchDataset's 10-minute deadline.
constexpr auto kStalePartial = std::chrono::hours(1);

// Removes `dir`.partial-* directories older than kStalePartial: what a daemon
// killed mid-fetch left behind. Best effort: a failure only leaves debris.
void SweepStalePartials(const std::string& dir) {
  const fs::path path(dir);
  const std::string prefix = path.filename().string() + ".partial-";
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const auto written = fs::last_write_time(entry.path(), ec);
    if (!ec && now - written > kStalePartial) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

absl::Status VerifyDatasetDir(const std::string& dir, const std::string& content_hash) {
  absl::StatusOr<std::string> meta_text = ReadFile(absl::StrCat(dir, "/", kMetaFile));
  if (!meta_text.ok()) return absl::DataLossError(meta_text.status().message());
  DatasetFileHashes computed;
  for (const auto& [name, hash] : {std::pair{kTokenizerFile, &computed.tokenizer},
                                   std::pair{kTrainFile, &computed.train},
                                   std::pair{kValFile, &computed.val}}) {
    ASSIGN_OR_RETURN(*hash, Sha256FileHex(absl::StrCat(dir, "/", name)));
  }
  const nlohmann::json meta =
      nlohmann::json::parse(*meta_text, nullptr, /*allow_exceptions=*/false);
  if (absl::Status verified = VerifyDatasetHashes(meta, computed, content_hash); !verified.ok()) {
    return absl::DataLossError(absl::StrCat(dir, ": ", verified.message()));
  }
  return absl::OkStatus();
}

std::string DatasetCache::DirFor(const std::string& content_hash) const {
  return absl::StrCat(cache_dir_, "/datasets/", content_hash);
}

absl::StatusOr<std::string> DatasetCache::Ensure(const std::string& content_hash,
                                                 CoordinatorClient& client) {
  if (!IsHexHash(content_hash)) {
    return absl::InvalidArgumentError(absl::StrCat("dataset hash \"", content_hash,
                                                   "\" is not 64 lower-case hex digits"));
  }
  const std::string dir = DirFor(content_hash);
  absl::MutexLock lock(&mu_);
  if (fs::exists(dir + "/meta.json")) return dir;
  // A directory of this fetch's own: other daemons sharing the cache may be
  // fetching the same dataset into theirs.
  const std::string datasets = fs::path(dir).parent_path().string();
  std::error_code ec;
  fs::create_directories(datasets, ec);
  SweepStalePartials(dir);
  std::string partial = absl::StrCat(dir, ".partial-XXXXXX");
  if (ec || mkdtemp(partial.data()) == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create a directory under ", datasets, ": ",
        ec ? ec.message() : std::strerror(errno)));
  }
  absl::Status status = Fetch(content_hash, partial, client);
  if (status.ok()) status = VerifyDatasetDir(partial, content_hash);
  // On disk before the name that says the dataset is complete, so a crash
  // never leaves a cached dataset with a torn file.
  for (const char* name : kDatasetFiles) {
    if (status.ok()) status = SyncToDisk(absl::StrCat(partial, "/", name));
  }
  if (status.ok()) status = SyncToDisk(partial);
  if (status.ok()) status = RenameDurably(partial, dir);
  if (!status.ok()) {
    fs::remove_all(partial, ec);
    // Another daemon published the same dataset first: its directory was
    // verified before its rename, as ours would have been.
    if (fs::exists(dir + "/meta.json")) return dir;
    return status;
  }
  return dir;
}

absl::Status DatasetCache::Fetch(const std::string& content_hash, const std::string& into,
                                 CoordinatorClient& client) {
  return client.FetchDataset(
      content_hash, absl::Minutes(10), [&](const v1::DatasetChunk& chunk) -> absl::Status {
        // Only the four dataset files, so a name can never leave `into`.
        if (!IsDatasetFileName(chunk.file_name())) {
          return absl::DataLossError(absl::StrCat("unexpected dataset file \"",
                                                  chunk.file_name(), "\""));
        }
        // `into` is a fresh directory: each file starts empty, and the
        // chunks fill it (synced and published by Ensure).
        return WriteFileChunk(absl::StrCat(into, "/", chunk.file_name()), chunk.offset(),
                              chunk.data());
      });
}

}  // namespace smallem
