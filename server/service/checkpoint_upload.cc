#include "server/service/checkpoint_upload.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "rpc/limits.h"

namespace smallem {

absl::Status CheckCheckpointPiece(const CheckpointPiece& p) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (p.run_id <= 0) return bad("run_id: required");
  if (p.attempt <= 0) return bad("attempt: required (from the lease)");
  if (p.step < 0) return bad("step: ", p.step, " (steps done, ≥ 0)");
  if (p.file_size <= 0 || p.file_size > kCheckpointFileBytes) {
    return bad("file_size: ", p.file_size, " bytes; a checkpoint holds 1 to ",
               kCheckpointFileBytes);
  }
  bool hex = p.sha256.size() == 64;
  for (char c : p.sha256) hex = hex && absl::ascii_isxdigit(c) && !absl::ascii_isupper(c);
  if (!hex) return bad("sha256: 64 lower-case hex digits expected");
  return absl::OkStatus();
}

absl::Status CheckpointUpload::Add(const CheckpointPiece& p) {
  RETURN_IF_ERROR(CheckCheckpointPiece(p));
  if (!started_) {
    // The lease first: a worker that does not hold it changes nothing,
    // not even by having its refused upload abandoned.
    ASSIGN_OR_RETURN(const RunRecord run, store_->GetRun(p.run_id));
    RETURN_IF_ERROR(CheckLease(run, p.attempt, p.worker_id, clock_->NowUnixMs()));
    first_ = p;
    first_.data = {};
    started_ = true;
    // The declared size is claimed at once, against the free disk less
    // what other uploads in flight have claimed (disk_reserve.h); it is
    // given back as chunks land and when the upload ends.
    ASSIGN_OR_RETURN(claim_, DiskClaim::Take(reserve_, p.file_size,
                                             absl::StrCat("a checkpoint of run ", p.run_id)));
  } else if (p.run_id != first_.run_id || p.attempt != first_.attempt ||
             p.sha256 != first_.sha256 || p.file_size != first_.file_size ||
             p.step != first_.step || p.worker_id != first_.worker_id) {
    return absl::InvalidArgumentError(
        "one upload carries one checkpoint: every chunk names the same worker, run, attempt, "
        "step, size and sha256");
  }
  if (static_cast<int64_t>(p.data.size()) > kDatasetChunkBytes || p.data.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", p.data.size(),
                                                   " bytes; 1 to ", kDatasetChunkBytes));
  }
  if (p.offset != next_offset_ ||
      p.offset + static_cast<int64_t>(p.data.size()) > p.file_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk at offset ", p.offset, " of ", p.data.size(), " bytes: expected offset ",
        next_offset_, " within ", p.file_size, " bytes (chunks go in order)"));
  }
  next_offset_ += static_cast<int64_t>(p.data.size());
  RETURN_IF_ERROR(store_->PutCheckpointChunk(
      CheckpointRecord{.run_id = p.run_id, .sha256 = p.sha256, .attempt = p.attempt,
                       .step = p.step, .device_class = "", .total_bytes = p.file_size},
      p.worker_id, p.offset, p.data, clock_->NowUnixMs()));
  claim_.Written(static_cast<int64_t>(p.data.size()));
  wrote_ = true;
  return absl::OkStatus();
}

absl::Status CheckpointUpload::Verify() {
  ASSIGN_OR_RETURN(const auto chunks, store_->ListCheckpointChunks(first_.run_id, first_.sha256));
  Sha256 hasher;
  int64_t offset = 0;
  for (const auto& [at, length] : chunks) {
    if (at != offset) break;
    ASSIGN_OR_RETURN(const std::string data,
                     store_->ReadCheckpointChunk(first_.run_id, first_.sha256, at));
    hasher.Update(data);
    offset += length;
  }
  if (offset != first_.file_size) {
    return absl::DataLossError(absl::StrCat("run ", first_.run_id, ": the checkpoint has ",
                                            offset, " of its ", first_.file_size,
                                            " bytes; upload it again"));
  }
  const std::string got = Sha256::ToHex(hasher.Finish());
  if (got != first_.sha256) {
    return absl::DataLossError(absl::StrCat("run ", first_.run_id, ": the checkpoint's bytes hash to ",
                                            got, ", not ", first_.sha256, "; upload it again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckpointUpload::Finish() {
  if (!started_) return absl::InvalidArgumentError("the upload carried no chunk");
  ASSIGN_OR_RETURN(const std::optional<CheckpointRecord> stored,
                   store_->GetCheckpoint(first_.run_id));
  // The same checkpoint again (a retry after a lost reply): already whole.
  if (stored && stored->sha256 == first_.sha256) return stored->total_bytes;
  if (absl::Status verified = Verify(); !verified.ok()) {
    Abandon();
    return verified;
  }
  RETURN_IF_ERROR(store_->CommitCheckpoint(first_.run_id, first_.attempt, first_.worker_id,
                                           first_.sha256, clock_->NowUnixMs()));
  return first_.file_size;
}

void CheckpointUpload::Abandon() {
  // Only what this stream stored: a stream refused before its first chunk
  // was written leaves another stream's upload of the same (run, sha256)
  // alone.
  if (!wrote_) return;
  absl::StatusOr<std::optional<CheckpointRecord>> stored = store_->GetCheckpoint(first_.run_id);
  // Never the run's complete checkpoint, only this partial upload.
  if (stored.ok() && *stored && (*stored)->sha256 == first_.sha256) return;
  store_->DeleteCheckpoint(first_.run_id, first_.sha256).IgnoreError();
}

}  // namespace smallem
