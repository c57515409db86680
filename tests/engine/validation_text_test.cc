// The validation text (docs/validation.md): spans fixed by the split and the
// number of batches, read by windows of any context, and its fingerprint.
#include "engine/train/validation_text.h"

#include <set>

#include "gtest/gtest.h"

namespace smallem {
namespace {

constexpr int64_t L = kValidationSpanTokens;

// The scored target positions of `windows`, in order.
std::vector<int64_t> ScoredPositions(const std::vector<ValidationWindow>& windows) {
  std::vector<int64_t> positions;
  for (const ValidationWindow& w : windows) {
    for (int64_t p = w.first_target(); p < w.start + 1 + w.length; ++p) positions.push_back(p);
  }
  return positions;
}

TEST(ValidationTextTest, SpansFollowTheFormula) {
  auto text = PlanValidationText(100'000, 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->spans, 20 * 16);
  EXPECT_EQ(text->stride, 99'999 / 320);
  EXPECT_EQ(text->SpanStart(0), 1 + text->stride - L);
  EXPECT_EQ(text->SpanStart(7), 1 + 8 * text->stride - L);
  EXPECT_EQ(text->targets(), 320 * L);
  EXPECT_EQ(text->batches(), 20);
  // The last span ends inside the split.
  EXPECT_LE(text->SpanStart(text->spans - 1) + L, 100'000);
}

TEST(ValidationTextTest, ShortSplitsGetFewerSpansAndTooShortOnesAClearError) {
  auto text = PlanValidationText(1000, 200);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->spans, 999 / L);
  EXPECT_EQ(text->batches(), 1);  // 15 spans: one partial batch
  EXPECT_GE(text->stride, L);
  EXPECT_LE(text->SpanStart(text->spans - 1) + L, 1000);
  auto tiny = PlanValidationText(L, 200);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("too few for one validation span"), std::string::npos)
      << tiny.status();
  EXPECT_TRUE(PlanValidationText(L + 1, 200).ok());
}

TEST(ValidationTextTest, EveryContextScoresExactlyTheSpansTargets) {
  for (int64_t n : {L + 1, int64_t{1000}, int64_t{5003}, int64_t{100'000}}) {
    auto text = PlanValidationText(n, 4);
    ASSERT_TRUE(text.ok()) << text.status();
    std::vector<int64_t> spans;
    for (int64_t j = 0; j < text->spans; ++j) {
      for (int64_t p = text->SpanStart(j); p < text->SpanStart(j) + L; ++p) spans.push_back(p);
    }
    for (int64_t context : {1, 7, 32, 63, 64, 65, 128, 512, 4096}) {
      const std::vector<ValidationWindow> windows = ValidationWindows(*text, context);
      EXPECT_EQ(ScoredPositions(windows), spans) << "N " << n << ", context " << context;
      for (const ValidationWindow& w : windows) {
        ASSERT_GE(w.start, 0);
        ASSERT_LE(w.length, context);
        ASSERT_LE(w.scored, w.length);
        ASSERT_LE(w.start + w.length, n - 1) << "a target past the split";
      }
    }
  }
}

TEST(ValidationTextTest, TargetsReadUpToTheirContextIncludingTokensBeforeTheirSpan) {
  auto text = PlanValidationText(100'000, 8);
  ASSERT_TRUE(text.ok());
  // Context ≥ L: one window per span, of the full context, whose targets
  // read between T − L + 1 and T tokens.
  for (int64_t context : {64, 128, 512}) {
    const std::vector<ValidationWindow> windows = ValidationWindows(*text, context);
    ASSERT_EQ(static_cast<int64_t>(windows.size()), text->spans);
    for (const ValidationWindow& w : windows) {
      EXPECT_EQ(w.length, context);
      EXPECT_EQ(w.scored, L);
      EXPECT_EQ(w.first_target() - w.start, context - L + 1);  // the first target's context
    }
  }
  // Context < L: pieces of T targets, each window full.
  const std::vector<ValidationWindow> windows = ValidationWindows(*text, 24);
  ASSERT_EQ(static_cast<int64_t>(windows.size()), text->spans * 3);  // 24 + 24 + 16
  EXPECT_EQ(windows[0].scored, 24);
  EXPECT_EQ(windows[2].scored, 16);
  for (const ValidationWindow& w : windows) EXPECT_EQ(w.length, 24);
}

TEST(ValidationTextTest, WindowsNearTheSplitsStartAreShorter) {
  // 16 spans in 16·L + 1 tokens: span 0 starts at position 1, with one
  // token before it.
  auto text = PlanValidationText(16 * L + 1, 1);
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->stride, L);
  ASSERT_EQ(text->SpanStart(0), 1);
  const std::vector<ValidationWindow> windows = ValidationWindows(*text, 128);
  EXPECT_EQ(windows[0], (ValidationWindow{.start = 0, .length = L, .scored = L}));
  EXPECT_EQ(windows[1], (ValidationWindow{.start = 0, .length = 2 * L, .scored = L}));
  EXPECT_EQ(windows[2], (ValidationWindow{.start = L, .length = 128, .scored = L}));
}

TEST(ValidationTextTest, FingerprintNamesTheDatasetAndThePositions) {
  const ValidationText a = *PlanValidationText(100'000, 20);
  const std::string fingerprint = ValidationFingerprint(a, "abc");
  EXPECT_EQ(fingerprint.size(), 64u);
  EXPECT_EQ(ValidationFingerprint(*PlanValidationText(100'000, 20), "abc"), fingerprint);
  std::set<std::string> others = {
      ValidationFingerprint(a, "abd"),
      ValidationFingerprint(*PlanValidationText(100'000, 21), "abc"),
      ValidationFingerprint(*PlanValidationText(100'001, 20), "abc")};
  EXPECT_EQ(others.size(), 3u);
  EXPECT_FALSE(others.contains(fingerprint));
}

}  // namespace
}  // namespace smallem
