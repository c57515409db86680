// FuzzDatasetMeta: a dataset's meta.json, beside valid data files (a
// byte-level tokenizer and a few tokens of each split, made once per
// process in a temporary directory). Dataset::Open, with and without its
// hash check, refuses or accepts it without crashing; what it accepts
// holds the token counts meta.json states.
//
// The scratch files are written plainly (not through WriteFileDurably):
// they are thrown away, and an fsync per input would slow the fuzzer down
// a hundredfold.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "base/check.h"
#include "corpus/dataset.h"
#include "corpus/dataset_format.h"
#include "fuzz/fuzz_targets.h"
#include "nlohmann/json.hpp"

namespace smallem::fuzz {
namespace {

void WriteScratch(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                                static_cast<long>(bytes.size()));
}

// The dataset directory, created on first use with everything but meta.json.
const std::string& ScratchDataset() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* path = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") +
                                 "/smallem-fuzz-dataset-" + std::to_string(getpid()));
    std::filesystem::create_directories(*path);
    WriteScratch(*path + "/" + kTokenizerFile, R"({"type":"byte_bpe","merges":[],"special":{}})");
    WriteScratch(*path + "/" + kTrainFile, std::string("a\0b\0c\0d\0", 8));
    WriteScratch(*path + "/" + kValFile, std::string("e\0f\0", 4));
    std::atexit([] { std::filesystem::remove_all(*dir); });
    return path;
  }();
  return *dir;
}

}  // namespace

int FuzzDatasetMeta(const uint8_t* data, size_t size) {
  const std::string& dir = ScratchDataset();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  WriteScratch(dir + "/" + kMetaFile, text);
  for (bool verify : {true, false}) {
    absl::StatusOr<Dataset> dataset = Dataset::Open(dir, verify);
    if (!dataset.ok()) continue;
    CHECK_EQ(dataset->train.size(), 4u);
    CHECK_EQ(dataset->val.size(), 2u);
    CHECK_EQ(dataset->tokenizer.vocab_size(), 256);
  }
  // The hash check alone, on whatever JSON the bytes are.
  nlohmann::json meta = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  (void)VerifyDatasetHashes(meta, DatasetFileHashes{.tokenizer = "a", .train = "b", .val = "c"},
                            "d");
  return 0;
}

}  // namespace smallem::fuzz
