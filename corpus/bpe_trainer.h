// TrainBpe: learns the merges of a byte-level BPE tokenizer from documents.
//
// The documents are split into chunks exactly as Tokenizer::Encode splits
// them (corpus/pretokenizer.h), and distinct chunks ("words") are counted.
// Then, until the vocabulary is full, the most frequent adjacent pair of ids,
// summed over words weighted by their counts, becomes the next merge. Ties go
// to the smallest pair (a, b), so the result depends only on the chunk counts:
// the same documents always give the same merges, whatever their order.
//
// Pair counts are updated incrementally after each merge, touching only the
// words that contain the merged pair (a pair -> words index), and the best
// pair comes from a max-heap whose stale entries are skipped when popped.
#ifndef SMALLEM_CORPUS_BPE_TRAINER_H_
#define SMALLEM_CORPUS_BPE_TRAINER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "corpus/progress.h"
#include "corpus/tokenizer.h"

namespace smallem {

struct BpeTrainOptions {
  // A pair seen fewer times than this is never merged: training stops early
  // (with a smaller vocabulary) when no pair is that frequent.
  int64_t min_pair_count = 2;
};

// Returns a tokenizer of at most vocab_size ids (256 bytes + merges), fewer
// when the documents run out of pairs of at least min_pair_count. Progress
// stages: "count" (chunk counting), "merge". InvalidArgument when vocab_size
// < 256 or does not fit an int32.
absl::StatusOr<Tokenizer> TrainBpe(const std::vector<std::string_view>& documents,
                                   int64_t vocab_size, const ProgressFn& progress = {},
                                   const BpeTrainOptions& options = {});

}  // namespace smallem

#endif  // SMALLEM_CORPUS_BPE_TRAINER_H_
