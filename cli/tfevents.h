// TensorBoard's event files, written by hand: a few protobuf fields of
// tensorflow.Event in TFRecord framing. No TensorFlow, no .proto: the bytes
// are simple enough to write directly, and tests/dashboard/ reads them back
// the same way (record framing, both CRCs, the scalars).
//
// TFRecord: per record, the length (uint64, little-endian), the masked
// CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data
// (mask: rotate right by 15, add 0xa282ead8).
//
// Event (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2
// (int64), file_version = 3 ("brain.Event:2", the first record), summary = 5.
// Summary.Value: tag = 1, simple_value = 2 (float) for scalars; for text,
// metadata = 9 (plugin "text") and tensor = 8 (DT_STRING, scalar shape, one
// string_val), which TensorBoard's text tab shows.
//
// Pure functions, except EventFileWriter, which owns one file.
#ifndef SMALLEM_CLI_TFEVENTS_H_
#define SMALLEM_CLI_TFEVENTS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace smallem::cli {

// CRC-32C (Castagnoli) of `data`, and its TFRecord mask.
uint32_t Crc32c(std::string_view data);
uint32_t MaskCrc(uint32_t crc);

// One TFRecord around `data`.
std::string TfRecord(std::string_view data);

// Serialized Event messages.
std::string FileVersionEvent(double wall_time);
std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag, float value);
std::string TextEvent(double wall_time, int64_t step, std::string_view tag,
                      std::string_view text);

// Collects events for one run directory and writes them as one event file,
// DIR/events.out.tfevents.<seconds>.smallem (the name TensorBoard looks for).
class EventFileWriter {
 public:
  explicit EventFileWriter(double wall_time);
  void AddScalar(int64_t step, std::string_view tag, double value, double wall_time);
  void AddText(int64_t step, std::string_view tag, std::string_view text);
  // Creates `dir` and writes the file durably (base/files.h). Errors of the
  // file system, naming the path.
  absl::Status WriteTo(const std::string& dir) const;

 private:
  double wall_time_;
  std::string records_;
};

}  // namespace smallem::cli

#endif  // SMALLEM_CLI_TFEVENTS_H_
