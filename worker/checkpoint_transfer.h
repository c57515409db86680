// The worker's side of checkpoints (docs/reliability.md): uploading each
// checkpoint its child writes, and downloading the one a lease names so the
// child can resume from it. Both move the file in chunks of at most
// kDatasetChunkBytes, named by its SHA-256, which the coordinator checks on
// upload and the worker checks on download.
//
// Free functions; thread-safe as the CoordinatorClient is.
#ifndef SMALLEM_WORKER_CHECKPOINT_TRANSFER_H_
#define SMALLEM_WORKER_CHECKPOINT_TRANSFER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/coordinator_client.h"

namespace smallem {

// The attempt a transfer acts for.
struct CheckpointAttempt {
  std::string worker_id;
  int64_t run_id = 0;
  int attempt = 0;
};

// Uploads the checkpoint file at `path` (holding `step` steps) for
// `attempt`. The file is read through one open descriptor, so a checkpoint
// the child writes meanwhile (renamed over `path`) does not mix in. Returns
// the bytes stored. Errors: the file's (NotFound, ...), the coordinator's
// (FailedPrecondition when the lease is gone; transient ones,
// IsTransient, when it is away).
absl::StatusOr<int64_t> UploadCheckpointFile(CoordinatorClient& client,
                                             const CheckpointAttempt& attempt,
                                             const std::string& path, int64_t step,
                                             absl::Duration deadline);

// Downloads the run's checkpoint, which the lease described as `sha256`
// of `bytes` bytes, to `path` (durably; a partial download leaves no file
// there). DataLoss when what arrived is not that file.
absl::Status DownloadCheckpoint(CoordinatorClient& client, const CheckpointAttempt& attempt,
                                const std::string& sha256, int64_t bytes,
                                const std::string& path, absl::Duration deadline);

}  // namespace smallem

#endif  // SMALLEM_WORKER_CHECKPOINT_TRANSFER_H_
