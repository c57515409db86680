#include "base/text.h"

#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

TEST(CountedNounTest, OneTakesTheSingularEveryOtherCountThePlural) {
  EXPECT_EQ(CountedNoun(1, "document", "documents"), "1 document");
  EXPECT_EQ(CountedNoun(0, "document", "documents"), "0 documents");
  EXPECT_EQ(CountedNoun(3, "variant", "variants"), "3 variants");
}

TEST(ShortestDecimalTest, PrintsTheShortestTextThatReadsBackExactly) {
  EXPECT_EQ(ShortestDecimal(0.1), "0.1");
  EXPECT_EQ(ShortestDecimal(1.2345), "1.2345");
  EXPECT_EQ(ShortestDecimal(3.0), "3");
  for (double v : {0.1 + 0.2, 2.0 / 3.0, 1e-7, 123456.789, -4.25e300}) {
    EXPECT_EQ(std::stod(ShortestDecimal(v)), v) << ShortestDecimal(v);
    EXPECT_LE(ShortestDecimal(v).size(), 24u) << ShortestDecimal(v);
  }
}

TEST(ShellWordTest, PlainWordsStayBareTheRestIsSingleQuoted) {
  EXPECT_EQ(ShellWord("grid.yaml"), "grid.yaml");
  EXPECT_EQ(ShellWord("/var/lib/smallem/db-1.sqlite"), "/var/lib/smallem/db-1.sqlite");
  EXPECT_EQ(ShellWord("host:50051"), "host:50051");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellWord("my grid.yaml"), "'my grid.yaml'");
  EXPECT_EQ(ShellWord("$HOME"), "'$HOME'");
  EXPECT_EQ(ShellWord("/scratch/it's here"), "'/scratch/it'\\''s here'");
}

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
