#include "worker/checkpoint_transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "rpc/limits.h"

namespace smallem {
namespace {

// An open file, closed on destruction.
class OpenFile {
 public:
  explicit OpenFile(int fd) : fd_(fd) {}
  ~OpenFile() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Reads up to `n` bytes at `offset`; fewer only at the end of the file.
absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, size_t n, const std::string& path) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

}  // namespace

absl::StatusOr<int64_t> UploadCheckpointFile(CoordinatorClient& client,
                                             const CheckpointAttempt& attempt,
                                             const std::string& path, int64_t step,
                                             absl::Duration deadline) {
  const OpenFile file(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.fd() < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  // One pass to hash, one to send: the coordinator is told the hash first.
  Sha256 hasher;
  int64_t size = 0;
  while (true) {
    ASSIGN_OR_RETURN(const std::string data,
                     ReadAt(file.fd(), size, static_cast<size_t>(kDatasetChunkBytes), path));
    if (data.empty()) break;
    hasher.Update(data);
    size += static_cast<int64_t>(data.size());
  }
  if (size == 0) return absl::DataLossError(absl::StrCat(path, " is empty"));
  const std::string sha256 = Sha256::ToHex(hasher.Finish());
  int64_t offset = 0;
  ASSIGN_OR_RETURN(const v1::UploadCheckpointResponse response,
                   client.UploadCheckpoint(deadline, [&](v1::CheckpointChunk* chunk)
                                                         -> absl::StatusOr<bool> {
                     if (offset == size) return false;
                     ASSIGN_OR_RETURN(std::string data,
                                      ReadAt(file.fd(), offset,
                                             static_cast<size_t>(kDatasetChunkBytes), path));
                     if (data.empty()) {
                       return absl::DataLossError(absl::StrCat(path, " shrank while read"));
                     }
                     chunk->set_worker_id(attempt.worker_id);
                     chunk->set_run_id(attempt.run_id);
                     chunk->set_attempt(attempt.attempt);
                     chunk->set_step(step);
                     chunk->set_sha256(sha256);
                     chunk->set_file_size(size);
                     chunk->set_offset(offset);
                     offset += static_cast<int64_t>(data.size());
                     *chunk->mutable_data() = std::move(data);
                     return true;
                   }));
  return response.stored_bytes();
}

absl::Status DownloadCheckpoint(CoordinatorClient& client, const CheckpointAttempt& attempt,
                                const std::string& sha256, int64_t bytes,
                                const std::string& path, absl::Duration deadline) {
  if (bytes <= 0 || bytes > kCheckpointFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint of ", bytes, " bytes"));
  }
  v1::FetchCheckpointRequest request;
  request.set_worker_id(attempt.worker_id);
  request.set_run_id(attempt.run_id);
  request.set_attempt(attempt.attempt);
  std::string contents;
  RETURN_IF_ERROR(client.FetchCheckpoint(
      request, deadline, [&](const v1::CheckpointChunk& chunk) -> absl::Status {
        if (chunk.sha256() != sha256 || chunk.offset() != static_cast<int64_t>(contents.size()) ||
            static_cast<int64_t>(contents.size() + chunk.data().size()) > bytes) {
          return absl::DataLossError(absl::StrCat(
              "run ", attempt.run_id, ": the coordinator sent checkpoint ", chunk.sha256(),
              " at offset ", chunk.offset(), "; the lease named ", sha256, " of ", bytes,
              " bytes"));
        }
        contents += chunk.data();
        return absl::OkStatus();
      }));
  if (static_cast<int64_t>(contents.size()) != bytes || Sha256Hex(contents) != sha256) {
    return absl::DataLossError(absl::StrCat("run ", attempt.run_id, ": the checkpoint arrived as ",
                                            contents.size(), " bytes that do not hash to ",
                                            sha256));
  }
  return WriteFileDurably(path, contents);
}

}  // namespace smallem
