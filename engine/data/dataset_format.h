// The dataset directory's format, as every part that handles one sees it:
// the data preparation that writes it, the coordinator that receives it in
// chunks and the worker's cache that downloads it. Tensor-free: the
// coordinator links this library without the engine's compute.
#ifndef SMALLEM_ENGINE_DATA_DATASET_FORMAT_H_
#define SMALLEM_ENGINE_DATA_DATASET_FORMAT_H_

#include <string>
#include <string_view>

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

}  // namespace smallem

#endif  // SMALLEM_ENGINE_DATA_DATASET_FORMAT_H_
