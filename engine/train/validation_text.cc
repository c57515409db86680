#include "engine/train/validation_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/sha256.h"

namespace smallem {

absl::StatusOr<ValidationText> PlanValidationText(int64_t val_tokens, int64_t requested_batches) {
  CHECK_GT(requested_batches, 0) << "validation batches must be positive";
  constexpr int64_t L = kValidationSpanTokens;
  // Target positions are 1 … N − 1: the first token has nothing before it.
  const int64_t positions = val_tokens - 1;
  if (positions < L) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation split has ", val_tokens, " tokens: too few for one validation span of ", L,
        " target tokens (prepare a larger corpus)"));
  }
  ValidationText text{.val_tokens = val_tokens};
  text.spans = std::min(requested_batches * kValidationSpansPerBatch, positions / L);
  text.stride = positions / text.spans;
  return text;
}

std::vector<ValidationWindow> ValidationWindows(const ValidationText& text, int64_t context) {
  CHECK_GT(context, 0) << "context must be positive";
  constexpr int64_t L = kValidationSpanTokens;
  const int64_t piece = std::min(L, context);
  std::vector<ValidationWindow> windows;
  windows.reserve(static_cast<size_t>(text.spans * ((L + piece - 1) / piece)));
  for (int64_t j = 0; j < text.spans; ++j) {
    const int64_t span = text.SpanStart(j);
    for (int64_t first = span; first < span + L; first += piece) {
      const int64_t end = std::min(first + piece, span + L);  // one past the last target
      // Targets of a window starting at a are a + 1 … a + length; the last
      // is end − 1, and a ≥ 0 bounds the length near the split's start.
      const int64_t length = std::min(context, end - 1);
      windows.push_back(
          ValidationWindow{.start = end - 1 - length, .length = length, .scored = end - first});
    }
  }
  return windows;
}

std::string ValidationFingerprint(const ValidationText& text, std::string_view dataset_hash) {
  // "v1" names the span formula of the file comment; a new formula takes a
  // new version, so results of the two never share a fingerprint.
  return Sha256Hex(absl::StrCat("smallem validation text v1\ndataset ", std::string(dataset_hash),
                                "\nval_tokens ", text.val_tokens, "\nspans ", text.spans,
                                "\nspan_tokens ", kValidationSpanTokens, "\nstride ",
                                text.stride, "\n"));
}

}  // namespace smallem
