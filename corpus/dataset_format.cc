#include "corpus/dataset_format.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "nlohmann/json.hpp"

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

absl::Status VerifyDatasetHashes(const nlohmann::json& meta, const DatasetFileHashes& computed,
                                 std::string_view expected_content_hash) {
  auto loss = [](const auto&... parts) { return absl::DataLossError(absl::StrCat(parts...)); };
  if (!meta.is_object()) return loss(kMetaFile, ": not a JSON object");
  const auto listed = meta.find("sha256");
  if (listed == meta.end() || !listed->is_object()) {
    return loss(kMetaFile, ": no \"sha256\" object");
  }
  for (const auto& [name, hash] : {std::pair{kTokenizerFile, &computed.tokenizer},
                                   std::pair{kTrainFile, &computed.train},
                                   std::pair{kValFile, &computed.val}}) {
    const auto entry = listed->find(name);
    if (entry == listed->end() || !entry->is_string()) {
      return loss(kMetaFile, ": \"sha256\" has no hash for ", name);
    }
    if (entry->get_ref<const std::string&>() != *hash) {
      return loss(name, ": SHA-256 differs from the one in meta.json (the file's is ", *hash,
                  ", meta.json's ", entry->get_ref<const std::string&>(), ")");
    }
  }
  const std::string content_hash =
      DatasetContentHash(computed.tokenizer, computed.train, computed.val);
  const auto recorded = meta.find("content_hash");
  if (recorded == meta.end() || !recorded->is_string() ||
      recorded->get_ref<const std::string&>() != content_hash) {
    return loss(kMetaFile, ": \"content_hash\" is ",
                recorded == meta.end() ? std::string("missing") : recorded->dump(),
                " but the files' hashes give ", content_hash);
  }
  if (!expected_content_hash.empty() && content_hash != expected_content_hash) {
    return loss("the files' content hash is ", content_hash, ", expected ",
                std::string(expected_content_hash));
  }
  return absl::OkStatus();
}

}  // namespace smallem
