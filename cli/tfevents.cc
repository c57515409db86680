#include "cli/tfevents.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/files.h"

namespace smallem::cli {
namespace {

// Protobuf wire format: the few pieces an Event needs.
void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void Tag(std::string& out, int field, int wire_type) { Varint(out, (field << 3) | wire_type); }
void Fixed64(std::string& out, int field, double v) {
  Tag(out, field, 1);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}
void Fixed32(std::string& out, int field, float v) {
  Tag(out, field, 5);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}
void Bytes(std::string& out, int field, std::string_view bytes) {
  Tag(out, field, 2);
  Varint(out, bytes.size());
  out.append(bytes);
}
void Int(std::string& out, int field, int64_t v) {
  Tag(out, field, 0);
  Varint(out, static_cast<uint64_t>(v));
}

std::string Event(double wall_time, int64_t step, std::string_view summary_value) {
  std::string summary;
  Bytes(summary, 1, summary_value);  // Summary.value
  std::string event;
  Fixed64(event, 1, wall_time);
  Int(event, 2, step);
  Bytes(event, 5, summary);
  return event;
}

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : data) crc = CrcTable()[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string TfRecord(std::string_view data) {
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(uint64_t{data.size()} >> (8 * i));
  auto le32 = [](uint32_t v) {
    std::string s(4, '\0');
    for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
    return s;
  };
  std::string record = length + le32(MaskCrc(Crc32c(length)));
  record.append(data);
  return record + le32(MaskCrc(Crc32c(data)));
}

std::string FileVersionEvent(double wall_time) {
  std::string event;
  Fixed64(event, 1, wall_time);
  Bytes(event, 3, "brain.Event:2");
  return event;
}

std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string v;
  Bytes(v, 1, tag);
  Fixed32(v, 2, value);
  return Event(wall_time, step, v);
}

std::string TextEvent(double wall_time, int64_t step, std::string_view tag,
                      std::string_view text) {
  std::string plugin;
  Bytes(plugin, 1, "text");  // PluginData.plugin_name
  std::string metadata;
  Bytes(metadata, 1, plugin);  // SummaryMetadata.plugin_data
  std::string tensor;
  Int(tensor, 1, 7);       // dtype: DT_STRING
  Bytes(tensor, 2, "");    // tensor_shape: a scalar
  Bytes(tensor, 8, text);  // string_val
  std::string v;
  Bytes(v, 1, tag);
  Bytes(v, 8, tensor);
  Bytes(v, 9, metadata);
  return Event(wall_time, step, v);
}

EventFileWriter::EventFileWriter(double wall_time)
    : wall_time_(wall_time), records_(TfRecord(FileVersionEvent(wall_time))) {}

void EventFileWriter::AddScalar(int64_t step, std::string_view tag, double value,
                                double wall_time) {
  records_ += TfRecord(ScalarEvent(wall_time, step, tag, static_cast<float>(value)));
}

void EventFileWriter::AddText(int64_t step, std::string_view tag, std::string_view text) {
  records_ += TfRecord(TextEvent(wall_time_, step, tag, text));
}

absl::Status EventFileWriter::WriteTo(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  return WriteFileDurably(
      absl::StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(wall_time_), ".smallem"),
      records_);
}

}  // namespace smallem::cli
