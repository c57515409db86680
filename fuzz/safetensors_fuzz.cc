// FuzzSafetensors: a weights file's bytes. What ParseSafetensors accepts
// holds tensors whose data is exactly their shape's size, inside the file.
#include <string_view>

#include "base/check.h"
#include "engine/io/safetensors.h"
#include "fuzz/fuzz_targets.h"

namespace smallem::fuzz {

int FuzzSafetensors(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes, "fuzz.safetensors");
  if (!file.ok()) return 0;
  size_t total = 0;
  for (const HostTensor& t : file->tensors) {
    unsigned __int128 expected = DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      CHECK_GE(d, 0);
      expected *= static_cast<uint64_t>(d);
    }
    CHECK(expected == t.data.size()) << t.name << ": " << t.data.size()
                                     << " bytes for its shape";
    total += t.data.size();
  }
  CHECK_LE(total, size);
  return 0;
}

}  // namespace smallem::fuzz
