// safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
//  "__metadata__": {"key": "string"}}, then the raw little-endian data.
// Readable by PyTorch / Hugging Face tooling.
#ifndef SMALLEM_ENGINE_IO_SAFETENSORS_H_
#define SMALLEM_ENGINE_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tensor.h"

namespace smallem {

struct HostTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<char> data;  // little-endian, numel · DTypeSize(dtype) bytes
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<HostTensor> tensors;  // in file order

  const HostTensor* Find(const std::string& name) const;
};

// Writes durably and atomically (WriteFileDurably): a reader never sees half
// a file. WriteFileDurably's error otherwise.
absl::Status WriteSafetensors(const std::string& path, const SafetensorsFile& file);
// A file that cannot be read is ReadFile's error (NotFound when it is
// missing). Every malformed case (truncated header or data, bad JSON, offsets
// out of range or overlapping, unknown dtype, size mismatch) is an
// InvalidArgument naming the path and the problem.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);
// The same from the file's bytes; `path` names it in error messages.
absl::StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes, const std::string& path);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_IO_SAFETENSORS_H_
