#include "base/text.h"

#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

TEST(SanitizeTextTest, ValidTextIsUnchanged) {
  const std::string text = "step 12: loss is NaN\n\tété 日本 🙂";
  EXPECT_EQ(SanitizeText(text, 1000), text);
}

TEST(SanitizeTextTest, CutsOnACharacterBoundary) {
  // 4095 × 'x' then 'é' (2 bytes): a cut at 4096 bytes would keep half of it.
  const std::string text = std::string(4095, 'x') + "é";
  const std::string cut = SanitizeText(text, 4096);
  EXPECT_EQ(cut, std::string(4095, 'x'));
  EXPECT_EQ(SanitizeText(text, 4097), text);
  EXPECT_EQ(SanitizeText("🙂🙂", 7), "🙂");
}

TEST(SanitizeTextTest, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(SanitizeText("a\xC3", 100), "a\xEF\xBF\xBD");            // truncated sequence
  EXPECT_EQ(SanitizeText("\xFF", 100), "\xEF\xBF\xBD");              // never valid
  EXPECT_EQ(SanitizeText("\xC0\xAF", 100), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(SanitizeText("\xED\xA0\x80", 100),                        // a surrogate
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(SanitizeTextTest, ControlSequencesCannotReachATerminal) {
  // An ANSI colour and a carriage return that would overwrite a log line.
  EXPECT_EQ(SanitizeText("\x1b[31mred\rfake", 100), "\xEF\xBF\xBD[31mred\xEF\xBF\xBD" "fake");
  EXPECT_EQ(SanitizeText("c1:\xC2\x9B", 100), "c1:\xEF\xBF\xBD");  // C1 CSI
  EXPECT_EQ(SanitizeText("two\nlines", 100), "two\nlines");
}

TEST(SanitizeLineTest, NewlinesCannotForgeALogLine) {
  EXPECT_EQ(SanitizeLine("worker-1\n[info] forged", 100), "worker-1 [info] forged");
  EXPECT_EQ(SanitizeLine(std::string(1 << 20, 'a'), 128), std::string(128, 'a'));
}

}  // namespace
}  // namespace smallem
