#include "engine/io/safetensors.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a valid safetensors file: ", what));
}

absl::StatusOr<DType> ParseDType(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "I32") return DType::kI32;
  return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", s));
}

}  // namespace

const HostTensor* SafetensorsFile::Find(const std::string& name) const {
  for (const HostTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::Status WriteSafetensors(const std::string& path, const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const HostTensor& t : file.tensors) {
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Pad the header with spaces so the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();

  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::vector<std::string_view> pieces = {std::string_view(len, 8), text};
  for (const HostTensor& t : file.tensors) pieces.emplace_back(t.data.data(), t.data.size());
  return WriteFileDurably(path, pieces);
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  return ParseSafetensors(bytes, path);
}

absl::StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes,
                                                 const std::string& path) {
  if (bytes.size() < 8) return Corrupt(path, "shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 8) {
    return Corrupt(path, absl::StrCat("header of ", n, " bytes but the file has ", bytes.size(),
                                      " (truncated?)"));
  }
  nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + n,
                                                nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Corrupt(path, "header is not JSON");
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;

  SafetensorsFile file;
  uint64_t covered = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // each tensor's [begin, end)
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Corrupt(path, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return Corrupt(path, "__metadata__ values must be strings");
        file.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const nlohmann::json& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
      return Corrupt(path, absl::StrCat("bad entry for tensor ", it.key()));
    }
    absl::StatusOr<DType> dtype = ParseDType(e["dtype"].get<std::string>());
    if (!dtype.ok()) return Corrupt(path, absl::StrCat(it.key(), ": ", dtype.status().message()));
    HostTensor t{.name = it.key(), .dtype = *dtype};
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return Corrupt(path, "bad shape");
      t.shape.push_back(d.get<int64_t>());
      // A shape whose size wraps around 2^64 could match any byte count.
      overflow |= __builtin_mul_overflow(numel, d.get<uint64_t>(), &numel);
    }
    uint64_t bytes_needed = 0;
    overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(DTypeSize(*dtype)),
                                       &bytes_needed);
    if (overflow) return Corrupt(path, absl::StrCat(it.key(), ": shape too large"));
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return Corrupt(path, "bad data_offsets");
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return Corrupt(path, absl::StrCat(it.key(), ": data [", begin, ", ", end, ") beyond the ",
                                        data_size, " data bytes (truncated?)"));
    }
    if (end - begin != bytes_needed) {
      return Corrupt(path, absl::StrCat(it.key(), ": ", end - begin, " bytes for its shape"));
    }
    covered += end - begin;
    ranges.emplace_back(begin, end);
    t.data.assign(data + begin, data + end);
    file.tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Corrupt(path, "tensors overlap");
  }
  if (covered != data_size) {
    return Corrupt(path, "data section size does not match its tensors");
  }
  return file;
}

}  // namespace smallem
