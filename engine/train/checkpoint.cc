#include "engine/train/checkpoint.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

using nlohmann::json;

constexpr std::string_view kMagic = "SMLMCKPT";
constexpr size_t kPrefixBytes = 8 + 4 + 8;  // magic, version, header length
constexpr size_t kHashBytes = 32;
// A header larger than this is not one this code wrote.
constexpr uint64_t kMaxHeaderBytes = 64 << 20;

// The build is little-endian (x86-64, aarch64): integers are copied as they
// lie in memory.
template <typename T>
void Append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
T Load(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

absl::Status Corrupt(const std::string& path, const std::string& why) {
  return absl::DataLossError(
      absl::StrCat(path, ": not a usable checkpoint (", why, "); start the run afresh"));
}

json Header(const Checkpoint& c) {
  json tensors = json::array();
  uint64_t offset = 0;
  for (const Checkpoint::F32& t : c.tensors) {
    tensors.push_back({{"name", t.name}, {"dtype", "f32"}, {"count", t.values.size()},
                       {"offset", offset}});
    offset += t.values.size() * sizeof(float);
  }
  tensors.push_back({{"name", "data.order"}, {"dtype", "i64"}, {"count", c.data.order.size()},
                     {"offset", offset}});
  json rng = json::array();
  for (uint64_t word : c.data.rng.s) rng.push_back(word);
  // NaN has no JSON spelling: a non-finite loss is written as null.
  const json last_loss = std::isfinite(c.last_loss) ? json(c.last_loss) : json(nullptr);
  return {{"spec", c.spec_json},
          {"dataset", c.dataset_hash},
          {"device_class", c.device_class},
          {"steps", c.steps},
          {"train_seconds", c.train_seconds},
          {"last_loss", last_loss},
          {"resumes", c.resumes},
          {"optimizer_steps", c.optimizer_steps},
          {"data_cursor", c.data.cursor},
          {"data_consumed", c.data.consumed},
          {"rng", rng},
          {"rng_has_spare", c.data.rng.has_spare},
          {"rng_spare", c.data.rng.spare},
          {"tensors", tensors}};
}

// Fills the scalars of `c` from a parsed header; json's typed getters throw
// on a wrong type, so the caller catches.
void ReadScalars(const json& h, Checkpoint& c) {
  c.spec_json = h.at("spec").get<std::string>();
  c.dataset_hash = h.at("dataset").get<std::string>();
  c.device_class = h.at("device_class").get<std::string>();
  c.steps = h.at("steps").get<int64_t>();
  c.train_seconds = h.at("train_seconds").get<double>();
  const json& loss = h.at("last_loss");
  c.last_loss = loss.is_null() ? std::numeric_limits<float>::quiet_NaN() : loss.get<float>();
  c.resumes = h.at("resumes").get<int64_t>();
  c.optimizer_steps = h.at("optimizer_steps").get<int64_t>();
  c.data.cursor = h.at("data_cursor").get<int64_t>();
  c.data.consumed = h.at("data_consumed").get<int64_t>();
  const json& rng = h.at("rng");
  if (!rng.is_array() || rng.size() != 4) throw std::runtime_error("rng: 4 words expected");
  for (size_t i = 0; i < 4; ++i) c.data.rng.s[i] = rng[i].get<uint64_t>();
  c.data.rng.has_spare = h.at("rng_has_spare").get<bool>();
  c.data.rng.spare = h.at("rng_spare").get<double>();
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  const std::string header = Header(checkpoint).dump();
  std::string prefix(kMagic);
  Append<uint32_t>(prefix, kCheckpointVersion);
  Append<uint64_t>(prefix, header.size());
  std::vector<std::string_view> pieces = {prefix, header};
  for (const Checkpoint::F32& t : checkpoint.tensors) {
    pieces.emplace_back(reinterpret_cast<const char*>(t.values.data()),
                        t.values.size() * sizeof(float));
  }
  pieces.emplace_back(reinterpret_cast<const char*>(checkpoint.data.order.data()),
                      checkpoint.data.order.size() * sizeof(int64_t));
  Sha256 hash;
  for (std::string_view piece : pieces) hash.Update(piece);
  const Sha256::Digest digest = hash.Finish();
  pieces.emplace_back(reinterpret_cast<const char*>(digest.data()), digest.size());
  return WriteFileDurably(path, pieces);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  if (bytes.size() < kPrefixBytes + kHashBytes || std::string_view(bytes).substr(0, 8) != kMagic) {
    return Corrupt(path, "no checkpoint signature");
  }
  const auto version = Load<uint32_t>(bytes.data() + 8);
  if (version != kCheckpointVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": checkpoint format version ", version, "; this build reads ",
                     kCheckpointVersion, " (finish the run with the build that started it)"));
  }
  const size_t body = bytes.size() - kHashBytes;
  Sha256 hash;
  hash.Update(bytes.data(), body);
  const Sha256::Digest digest = hash.Finish();
  if (std::memcmp(digest.data(), bytes.data() + body, kHashBytes) != 0) {
    return Corrupt(path, "its SHA-256 does not match: truncated or damaged");
  }
  const auto header_bytes = Load<uint64_t>(bytes.data() + 12);
  if (header_bytes > kMaxHeaderBytes || kPrefixBytes + header_bytes > body) {
    return Corrupt(path, "header length beyond the file");
  }
  const json header = json::parse(bytes.substr(kPrefixBytes, header_bytes), nullptr, false);
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");
  const size_t payload = kPrefixBytes + header_bytes;
  const uint64_t payload_bytes = body - payload;
  Checkpoint c;
  try {
    ReadScalars(header, c);
    for (const json& t : header.at("tensors")) {
      const std::string name = t.at("name").get<std::string>();
      const std::string dtype = t.at("dtype").get<std::string>();
      const auto count = t.at("count").get<uint64_t>();
      const auto offset = t.at("offset").get<uint64_t>();
      const uint64_t element = dtype == "i64" ? sizeof(int64_t) : sizeof(float);
      if ((dtype != "f32" && dtype != "i64") || count > payload_bytes / element ||
          offset > payload_bytes - count * element) {
        return Corrupt(path, absl::StrCat("tensor ", name, " lies outside the file"));
      }
      const char* at = bytes.data() + payload + offset;
      if (dtype == "i64") {
        if (name != "data.order") return Corrupt(path, absl::StrCat("unknown i64 tensor ", name));
        c.data.order.resize(count);
        std::memcpy(c.data.order.data(), at, count * element);
      } else {
        Checkpoint::F32& out = c.tensors.emplace_back(Checkpoint::F32{.name = name});
        out.values.resize(count);
        std::memcpy(out.values.data(), at, count * element);
      }
    }
  } catch (const json::exception& e) {
    return Corrupt(path, absl::StrCat("header: ", e.what()));
  } catch (const std::runtime_error& e) {
    return Corrupt(path, absl::StrCat("header: ", e.what()));
  }
  return c;
}

}  // namespace smallem
