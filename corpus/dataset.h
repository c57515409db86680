// Dataset: a tokenized corpus on disk, ready for training.
//
// A dataset is a directory (docs/architecture.md § The formats):
//   tokenizer.json  the byte-level BPE tokenizer (corpus/tokenizer.h)
//   train.bin       training tokens, little-endian uint16
//   val.bin         validation tokens, little-endian uint16
//   meta.json       sizes and hashes (written last: its presence marks a
//                   complete dataset)
//
// meta.json fields: "vocab"; "train_tokens", "val_tokens"; "train_bytes",
// "val_bytes" (UTF-8 bytes the tokens decode to); "bytes_per_token" (over
// both files); "train_documents", "val_documents", "val_document_names";
// "source" (where the text came from); "sha256" {"tokenizer.json", "train.bin",
// "val.bin": lower-case hex}; "content_hash" (DatasetContentHash of those
// three: the dataset's identity for the coordinator and the workers' cache).
//
// The validation split is held out by document, so no validation text is
// ever seen in training, and it is chosen by a hash of the document's index
// (the same corpus always gives the same split). The tokenizer is trained on
// the training documents only. Each document ends with a blank line, so
// documents never run together.
#ifndef SMALLEM_CORPUS_DATASET_H_
#define SMALLEM_CORPUS_DATASET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "corpus/corpus.h"
#include "corpus/dataset_format.h"
#include "corpus/progress.h"
#include "corpus/tokenizer.h"
#include "nlohmann/json.hpp"

namespace smallem {

inline constexpr int64_t kMaxDatasetVocab = 65536;  // ids are stored as uint16

struct PrepareOptions {
  std::vector<std::string> files;  // one document per file; empty: the default corpus
  int64_t vocab = 8192;            // in [256, 65536]
  std::string out_dir;             // created if missing; dataset files replaced
  double val_fraction = 0.05;      // of the documents (at least one), in (0, 1)
  DefaultCorpusOptions corpus;     // how to fetch the default corpus
};

// Loads the corpus, splits it, trains the tokenizer, encodes and writes the
// dataset directory. Progress stages: "fetch" (default corpus), "count" and
// "merge" (tokenizer training), "encode", "write". InvalidArgument for bad
// options (vocab out of range, fewer than two documents); the corpus loaders'
// errors otherwise (corpus/corpus.h).
absl::Status PrepareDataset(const PrepareOptions& options, const ProgressFn& progress = {});

// The same from documents already loaded.
absl::Status PrepareDatasetFromCorpus(const Corpus& corpus, const PrepareOptions& options,
                                      const ProgressFn& progress = {});

struct Dataset {
  std::string dir;
  Tokenizer tokenizer;
  std::vector<uint16_t> train;  // (train_tokens)
  std::vector<uint16_t> val;    // (val_tokens)
  nlohmann::json meta;

  // Reads and checks a dataset directory: every file present, token files of
  // even size holding the counts meta.json gives, every id below the
  // vocabulary, and (when verify_hashes) each file's SHA-256 and the content
  // hash as recorded. NotFound when the directory or a file is missing;
  // DataLoss naming the file when one is corrupt.
  static absl::StatusOr<Dataset> Open(const std::string& dir, bool verify_hashes = true);

  int64_t vocab() const { return tokenizer.vocab_size(); }
  std::string content_hash() const { return meta.value("content_hash", ""); }
};

}  // namespace smallem

#endif  // SMALLEM_CORPUS_DATASET_H_
