// DatasetCache: prepared datasets on a worker, by content hash, under
// CACHE/datasets/<hash>/. A missing dataset is fetched from the coordinator
// in chunks into a temporary directory, checked (each file's SHA-256 against
// meta.json, and the content hash), synced to disk, then renamed into place
// — so a directory under its hash is always complete, even after a crash.
//
// Thread-safe: concurrent Ensure calls fetch a dataset once. Daemons that
// share a cache directory may fetch the same dataset at the same time, each
// into a directory of its own; the first rename publishes it and the others
// discard theirs. A fetch also removes the partial directories of its
// dataset older than an hour (left by a daemon killed mid-fetch).
#ifndef SMALLEM_WORKER_DATASET_CACHE_H_
#define SMALLEM_WORKER_DATASET_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/coordinator_client.h"

namespace smallem {

class DatasetCache {
 public:
  explicit DatasetCache(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

  // The local directory of dataset `content_hash`, fetched through `client`
  // when missing. InvalidArgument for a hash that is not 64 hex digits;
  // DataLoss when what arrived does not match its hashes; the fetch's
  // error otherwise.
  absl::StatusOr<std::string> Ensure(const std::string& content_hash, CoordinatorClient& client);

  // Where dataset `content_hash` lives (or would).
  std::string DirFor(const std::string& content_hash) const;

 private:
  absl::Status Fetch(const std::string& content_hash, const std::string& into,
                     CoordinatorClient& client);

  const std::string cache_dir_;
  absl::Mutex mu_;  // held during a fetch: one fetch at a time
};

// Checks a dataset directory against its meta.json (VerifyDatasetHashes):
// each file's SHA-256 and the content hash, which must equal `content_hash`.
// DataLoss naming the directory and the file at fault otherwise, or a
// missing or unreadable meta.json; NotFound when another file is missing.
absl::Status VerifyDatasetDir(const std::string& dir, const std::string& content_hash);

}  // namespace smallem

#endif  // SMALLEM_WORKER_DATASET_CACHE_H_
