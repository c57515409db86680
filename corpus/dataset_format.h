// The dataset directory's format, as every part that handles one sees it:
// the data preparation that writes it, the coordinator that receives it in
// chunks and the worker's cache that downloads it. Tensor-free: the
// coordinator links this library without the engine's compute.
#ifndef SMALLEM_CORPUS_DATASET_FORMAT_H_
#define SMALLEM_CORPUS_DATASET_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

inline constexpr char kTokenizerFile[] = "tokenizer.json";
inline constexpr char kTrainFile[] = "train.bin";
inline constexpr char kValFile[] = "val.bin";
inline constexpr char kMetaFile[] = "meta.json";
// Every file of a dataset directory, meta.json first.
inline constexpr const char* kDatasetFiles[] = {kMetaFile, kTokenizerFile, kTrainFile, kValFile};

// True for the four file names a dataset directory holds (nothing else, so
// no path can escape a directory).
bool IsDatasetFileName(std::string_view name);

// SHA-256 (hex) of the text `sha256sum tokenizer.json train.bin val.bin`
// prints: "<hex>  tokenizer.json\n<hex>  train.bin\n<hex>  val.bin\n".
std::string DatasetContentHash(std::string_view tokenizer_sha256,
                               std::string_view train_sha256, std::string_view val_sha256);

// The SHA-256 (hex) of each content file of a dataset, computed from its
// bytes.
struct DatasetFileHashes {
  std::string tokenizer;  // of tokenizer.json
  std::string train;      // of train.bin
  std::string val;        // of val.bin
};

// Checks a dataset's meta.json against the hashes computed from its files:
// meta["sha256"] must hold each file's hash, meta["content_hash"] must be
// the DatasetContentHash of them and, when `expected_content_hash` is not
// empty, equal it. The one check of a dataset's integrity, wherever one
// arrives: the data library opening a directory, the coordinator receiving
// an upload, a worker's cache receiving a download.
//
// OK when everything matches. DataLoss otherwise, its message beginning with
// the file at fault and giving the hashes compared, e.g. "val.bin: SHA-256
// differs from the one in meta.json (the file's is 3f0c..., meta.json's
// 9a41...)"; the caller prefixes where the dataset is. `meta` may be
// anything parsed (a discarded or non-object value is DataLoss too).
absl::Status VerifyDatasetHashes(const nlohmann::json& meta, const DatasetFileHashes& computed,
                                 std::string_view expected_content_hash = "");

}  // namespace smallem

#endif  // SMALLEM_CORPUS_DATASET_FORMAT_H_
