// ValidationText: which tokens of the validation split a run is scored on
// (docs/validation.md), and the windows a model of a given context reads to
// score them.
//
// The scored text is fixed by the split and the evaluation settings alone —
// never by the training batch, the context or the seed — so every variant
// of an experiment is scored on the same target tokens. With N validation
// tokens and K validation batches requested there are S = 16·K spans of
// L = 64 target tokens (fewer when the split is short: S = ⌊(N − 1)/L⌋);
// the split's target positions 1 … N − 1 are cut into S blocks of
// g = ⌊(N − 1)/S⌋ positions, and span j is the last L positions of block j:
//
//   span j = target positions [1 + (j + 1)·g − L, 1 + (j + 1)·g),  j < S.
//
// A model of context T scores a span in pieces of c = min(L, T) targets
// (one piece when T ≥ L); each piece is the last targets of one window of up
// to T inputs ending just before the piece's last target, so a target reads
// up to T tokens of context, including tokens before its span. Only the
// first windows of the split can be shorter than T (there are fewer tokens
// before them).
//
// Plain values; thread-compatible.
#ifndef SMALLEM_ENGINE_TRAIN_VALIDATION_TEXT_H_
#define SMALLEM_ENGINE_TRAIN_VALIDATION_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

// L: target tokens per span.
inline constexpr int64_t kValidationSpanTokens = 64;
// Spans per validation batch: K batches are 16·K spans.
inline constexpr int64_t kValidationSpansPerBatch = 16;

struct ValidationText {
  int64_t val_tokens = 0;  // N: tokens in the validation split
  int64_t spans = 0;       // S: spans actually scored (≤ 16·K)
  int64_t stride = 0;      // g = ⌊(N − 1)/S⌋ ≥ L

  // Position of the first target of span j (0 ≤ j < spans).
  int64_t SpanStart(int64_t j) const { return 1 + (j + 1) * stride - kValidationSpanTokens; }
  // Target tokens scored: S·L.
  int64_t targets() const { return spans * kValidationSpanTokens; }
  // Validation batches these spans fill, the last possibly partial: ⌈S/16⌉.
  int64_t batches() const {
    return (spans + kValidationSpansPerBatch - 1) / kValidationSpansPerBatch;
  }
};

// The spans of a split of `val_tokens` tokens for `requested_batches`
// validation batches (> 0). Fewer spans when the split cannot hold 16·K
// disjoint spans; InvalidArgument when it cannot hold one (fewer than L + 1
// tokens), with a message that says what to do.
absl::StatusOr<ValidationText> PlanValidationText(int64_t val_tokens, int64_t requested_batches);

// One row of an evaluation forward pass: inputs are tokens
// [start, start + length) of the split, its targets [start + 1,
// start + length], and the last `scored` of those targets belong to a span.
struct ValidationWindow {
  int64_t start = 0;
  int64_t length = 0;  // ≤ the model's context
  int64_t scored = 0;  // ≤ length

  // First scored target position.
  int64_t first_target() const { return start + 1 + length - scored; }

  bool operator==(const ValidationWindow&) const = default;
};

// Every window a model of context `context` (> 0) reads to score `text`, in
// span order; their scored targets are exactly the spans' positions, each
// once, whatever the context.
std::vector<ValidationWindow> ValidationWindows(const ValidationText& text, int64_t context);

// The fingerprint of the scored targets: the lower-case hex SHA-256 of the
// definition's version, the dataset's content hash and (N, S, L, g), which
// fix every scored position. Two results with equal fingerprints were scored
// on the same target tokens of the same data.
std::string ValidationFingerprint(const ValidationText& text, std::string_view dataset_hash);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_VALIDATION_TEXT_H_
