// Checkpoints on the coordinator (docs/reliability.md): the attempt holding
// a run's lease uploads each checkpoint its child writes as a stream of
// chunks of one file; once whole, and its SHA-256 equal to the one claimed,
// it replaces the run's previous checkpoint (SqliteStore::CommitCheckpoint).
// A broken upload leaves nothing behind; the run keeps its previous one.
#ifndef SMALLEM_SERVER_SERVICE_CHECKPOINT_UPLOAD_H_
#define SMALLEM_SERVER_SERVICE_CHECKPOINT_UPLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/service/disk_reserve.h"
#include "server/store/sqlite_store.h"

namespace smallem {

// One chunk as the wire carries it (smallem.v1.CheckpointChunk).
struct CheckpointPiece {
  std::string worker_id;
  int64_t run_id = 0;
  int attempt = 0;
  int64_t step = 0;
  std::string sha256;     // of the whole file, 64 lower-case hex digits
  int64_t file_size = 0;  // bytes
  int64_t offset = 0;
  std::string_view data;
};

// One upload stream. Not thread-safe (one per call); the store is.
class CheckpointUpload {
 public:
  CheckpointUpload(SqliteStore* store, const Clock* clock, DiskReserve reserve = {})
      : store_(store), clock_(clock), reserve_(std::move(reserve)) {}

  // Stores one chunk. The first names the checkpoint (run, attempt, step,
  // size, SHA-256); every later one must name the same and continue where
  // the last ended. InvalidArgument for a bad field, a chunk out of order
  // or beyond the size; FailedPrecondition when the attempt no longer holds
  // the run's lease; ResourceExhausted when the disk reserve, less what
  // uploads in flight claimed of it, leaves no room for the declared size
  // (the claim lasts until this upload ends).
  absl::Status Add(const CheckpointPiece& piece);

  // Checks the whole file against its SHA-256 and makes it the run's
  // checkpoint. Returns its size. DataLoss when bytes are missing or the
  // hash differs (the upload is dropped).
  absl::StatusOr<int64_t> Finish();

  // Drops what this upload stored, after a refused chunk; nothing when this
  // stream stored no chunk (a refused first chunk changes nothing).
  void Abandon();

 private:
  absl::Status Verify();

  SqliteStore* store_;
  const Clock* clock_;
  DiskReserve reserve_;
  DiskClaim claim_;  // the declared bytes not yet written
  CheckpointPiece first_;  // data unused
  int64_t next_offset_ = 0;
  bool started_ = false;  // the first chunk passed the lease check
  bool wrote_ = false;    // a chunk of this stream reached the store
};

// The checks of a checkpoint's identity every chunk must pass: a run id,
// an attempt, a step ≥ 0, a size within kCheckpointFileBytes and a SHA-256
// written as 64 lower-case hex digits. InvalidArgument naming the field.
absl::Status CheckCheckpointPiece(const CheckpointPiece& piece);

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_CHECKPOINT_UPLOAD_H_
