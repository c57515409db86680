#include "server/queue/result_schema.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

constexpr size_t kMaxResultStringBytes = 256;

absl::Status Expected(const char* field, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("result_json: \"", field, "\" must be ", what));
}

}  // namespace

absl::Status CheckResultJson(const nlohmann::json& result) {
  if (!result.is_object()) return absl::InvalidArgumentError("result_json: not a JSON object");
  if (!result.contains("val_nats_per_byte")) {
    return absl::InvalidArgumentError("result_json: \"val_nats_per_byte\" is required");
  }
  for (const char* field : {"val_nats_per_byte", "train_seconds", "val_nats_per_token",
                            "val_bits_per_byte", "tokens_per_s", "epochs",
                            "generation_tokens_per_s"}) {
    if (!result.contains(field)) continue;
    const nlohmann::json& v = result[field];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      return Expected(field, "a finite number ≥ 0");
    }
  }
  for (const char* field : {"steps", "tokens", "params", "seed", "eval_batches",
                            "kv_cache_bytes_per_token"}) {
    if (!result.contains(field)) continue;
    const nlohmann::json& v = result[field];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return Expected(field, "an integer ≥ 0");
  }
  for (const char* field : {"device", "device_class", "eval_fingerprint"}) {
    if (!result.contains(field)) continue;
    const nlohmann::json& v = result[field];
    if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxResultStringBytes) {
      return Expected(field, "a string of at most 256 bytes");
    }
  }
  return absl::OkStatus();
}

}  // namespace smallem
