#include "server/service/disk_reserve.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace smallem {

bool DiskClaims::TryClaim(int64_t available, int64_t bytes, int64_t min_free) {
  absl::MutexLock lock(&mu_);
  if (available - bytes_ - bytes < min_free) return false;
  bytes_ += bytes;
  return true;
}

void DiskClaims::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  bytes_ -= bytes;
}

int64_t DiskClaims::claimed_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

std::optional<int64_t> DiskReserve::Available() const {
  if (dir.empty()) return std::nullopt;
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return std::nullopt;
  return static_cast<int64_t>(space.available);
}

DiskClaim::DiskClaim(DiskClaim&& other) noexcept
    : claims_(std::move(other.claims_)), bytes_(std::exchange(other.bytes_, 0)) {}

DiskClaim& DiskClaim::operator=(DiskClaim&& other) noexcept {
  if (this != &other) {
    ReleaseAll();
    claims_ = std::move(other.claims_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DiskClaim::~DiskClaim() { ReleaseAll(); }

absl::StatusOr<DiskClaim> DiskClaim::Take(const DiskReserve& reserve, int64_t bytes,
                                          const std::string& what) {
  DiskClaim claim;
  const std::optional<int64_t> available = reserve.Available();
  if (!available) return claim;
  if (reserve.claims == nullptr) {
    if (*available - bytes >= reserve.min_free_bytes) return claim;
  } else if (reserve.claims->TryClaim(*available, bytes, reserve.min_free_bytes)) {
    claim.claims_ = reserve.claims;
    claim.bytes_ = bytes;
    return claim;
  }
  const int64_t claimed = reserve.claims ? reserve.claims->claimed_bytes() : 0;
  return absl::ResourceExhaustedError(absl::StrCat(
      "the coordinator's disk (", reserve.dir, ") has ", HumanBytes(*available), " free",
      claimed > 0 ? absl::StrCat(", ", HumanBytes(claimed), " of it promised to uploads in flight")
                  : "",
      "; ", what, " (", HumanBytes(bytes), ") must leave at least ",
      HumanBytes(reserve.min_free_bytes),
      ", kept for results (coordinator --min-free-disk-gb); try again when uploads in flight "
      "have ended"));
}

void DiskClaim::Written(int64_t bytes) {
  if (claims_ == nullptr) return;
  const int64_t given_back = std::min(bytes, bytes_);
  claims_->Release(given_back);
  bytes_ -= given_back;
}

void DiskClaim::ReleaseAll() {
  if (claims_ != nullptr && bytes_ > 0) claims_->Release(bytes_);
  bytes_ = 0;
  claims_ = nullptr;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " bytes");
  if (bytes < 1'000'000) return absl::StrFormat("%.1f kB", bytes / 1e3);
  if (bytes < 1'000'000'000) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.2f GB", bytes / 1e9);
}

}  // namespace smallem
