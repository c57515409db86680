// The disk a coordinator keeps free next to its database, shared by every
// upload: an upload that would leave less than min_free_bytes on the file
// system holding `dir` is refused before it is stored, so that results —
// written to the same database — always find room.
//
// Uploads in flight are counted together: a checkpoint upload claims the
// bytes it declared on its first chunk and gives them back as it writes
// them (or all at once when it ends), so that four uploads started at once
// cannot each find the same free space.
#ifndef SMALLEM_SERVER_SERVICE_DISK_RESERVE_H_
#define SMALLEM_SERVER_SERVICE_DISK_RESERVE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace smallem {

// The bytes claimed by uploads in flight. Thread-safe.
class DiskClaims {
 public:
  // Adds `bytes` to the claims when `available` free bytes, less every
  // claim held and `bytes`, still leave `min_free`; false (nothing claimed)
  // otherwise.
  bool TryClaim(int64_t available, int64_t bytes, int64_t min_free);
  // Gives back `bytes` of what was claimed.
  void Release(int64_t bytes);
  // The bytes claimed now.
  int64_t claimed_bytes() const;

 private:
  mutable absl::Mutex mu_;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

struct DiskReserve {
  std::string dir;  // "" checks nothing
  int64_t min_free_bytes = 0;
  // Shared by every upload of one coordinator; nullptr counts none.
  std::shared_ptr<DiskClaims> claims;

  // Free bytes of `dir`'s file system; nullopt when unknown (no dir, or the
  // file system cannot say: SQLite reports a full disk itself).
  std::optional<int64_t> Available() const;
};

// `bytes` claimed from a DiskReserve for one upload, given back as they are
// written (Written) and the rest on destruction. Movable, not copyable; not
// thread-safe (one per upload stream).
class DiskClaim {
 public:
  DiskClaim() = default;
  DiskClaim(DiskClaim&& other) noexcept;
  DiskClaim& operator=(DiskClaim&& other) noexcept;
  ~DiskClaim();

  // Claims `bytes` of `reserve` for `what` ("a checkpoint of 250 MB").
  // ResourceExhausted, saying what is free, claimed and kept, when the
  // reserve would be overrun; an empty claim when the reserve checks
  // nothing.
  static absl::StatusOr<DiskClaim> Take(const DiskReserve& reserve, int64_t bytes,
                                        const std::string& what);

  // `bytes` of the claim reached the disk: they are counted by the free
  // space now.
  void Written(int64_t bytes);

 private:
  void ReleaseAll();

  std::shared_ptr<DiskClaims> claims_;
  int64_t bytes_ = 0;  // still claimed
};

// "412 bytes", "3.1 MB", "82.20 GB".
std::string HumanBytes(int64_t bytes);

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_DISK_RESERVE_H_
