// Datasets on the coordinator: a prepared dataset directory travels as
// chunks of its four files (tokenizer.json, train.bin, val.bin, meta.json),
// is stored by content hash, and is checked before it counts as present —
// every file whole, each file's SHA-256 as meta.json records it, and the
// content hash (DatasetContentHash) equal to the one claimed.
#ifndef SMALLEM_SERVER_SERVICE_DATASET_UPLOAD_H_
#define SMALLEM_SERVER_SERVICE_DATASET_UPLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "rpc/limits.h"
#include "server/service/disk_reserve.h"
#include "server/store/sqlite_store.h"

namespace smallem {

struct UploadSummary {
  std::string content_hash;
  int64_t total_bytes = 0;
  int files = 0;
  bool already_present = false;
};

// One upload stream. Not thread-safe (one per call); the store is.
class DatasetUpload {
 public:
  DatasetUpload(SqliteStore* store, const Clock* clock, DiskReserve reserve = {})
      : store_(store), clock_(clock), reserve_(std::move(reserve)) {}

  // Stores one chunk. The first chunk names the dataset; every later one must
  // name the same. When that dataset is already complete — before this
  // upload began or since, by another — chunks are ignored. InvalidArgument for a bad file name, size or offset;
  // ResourceExhausted when what is left of the chunk's file (from its
  // offset on) needs more room than the disk reserve leaves, less what
  // uploads in flight claimed of it (disk_reserve.h);
  // FailedPrecondition when other bytes are already stored at that place
  // (a stored chunk is never replaced).
  absl::Status Add(std::string_view content_hash, const DatasetChunkRef& where,
                   std::string_view data);

  // Checks what was received and marks the dataset complete — only if its
  // chunks are still the ones checked (SqliteStore::CompleteDataset), so no
  // concurrent upload of the same hash can change a file in between.
  // DataLoss when a file is incomplete or its hash differs (the partial
  // upload is dropped); Aborted when the chunks changed meanwhile.
  absl::StatusOr<UploadSummary> Finish();

  // Drops what this upload stored, after a chunk was refused (or the store
  // failed, e.g. a full disk): a broken upload leaves no partial dataset
  // behind. Nothing happens when the dataset was already complete.
  void Abandon();

 private:
  // Hashes the files of `chunks` (as listed by the store) and checks them
  // against meta.json and the content hash.
  absl::StatusOr<UploadSummary> Verify(const std::vector<DatasetChunkRef>& chunks);
  absl::Status CheckRoomFor(const DatasetChunkRef& where) const;

  SqliteStore* store_;
  const Clock* clock_;
  DiskReserve reserve_;
  std::string content_hash_;
  bool already_present_ = false;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_DATASET_UPLOAD_H_
