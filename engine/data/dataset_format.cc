#include "engine/data/dataset_format.h"

#include <utility>

#include "base/sha256.h"

namespace smallem {

bool IsDatasetFileName(std::string_view name) {
  for (const char* f : kDatasetFiles) {
    if (name == f) return true;
  }
  return false;
}

std::string DatasetContentHash(std::string_view tokenizer_sha256,
                               std::string_view train_sha256, std::string_view val_sha256) {
  // (absl::StrCat takes no std::string_view with Debian's abseil.)
  std::string listing;
  for (const auto& [hash, name] : {std::pair{tokenizer_sha256, kTokenizerFile},
                                   std::pair{train_sha256, kTrainFile},
                                   std::pair{val_sha256, kValFile}}) {
    listing.append(hash).append("  ").append(name).append("\n");
  }
  return Sha256Hex(listing);
}

}  // namespace smallem
