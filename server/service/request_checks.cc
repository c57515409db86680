#include "server/service/request_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace smallem {

absl::Status CheckContentHash(absl::string_view hash, absl::string_view field) {
  if (hash.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  bool hex = hash.size() == 64;
  for (char c : hash) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": expected 64 lowercase hex digits (a SHA-256, meta.json's content_hash), got ",
        hash.size(), " characters"));
  }
  return absl::OkStatus();
}

}  // namespace smallem
