#include "corpus/text_cleaning.h"

#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

TEST(TextCleaningTest, NormalizesLineEndings) {
  EXPECT_EQ(NormalizeLineEndings("a\r\nb\rc\n\r\n"), "a\nb\nc\n\n");
}

TEST(TextCleaningTest, TidiesWhitespace) {
  EXPECT_EQ(TidyWhitespace("\n\n  \nfirst  \t\n\n\n\n\nsecond\nthird\n\n\n"),
            "first\n\nsecond\nthird\n");
  EXPECT_EQ(TidyWhitespace("  indented stays"), "  indented stays\n");
  EXPECT_EQ(TidyWhitespace("\n \n"), "");
}

TEST(TextCleaningTest, ChecksUtf8) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));            // Latin-1
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));           // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));       // surrogate
  EXPECT_FALSE(IsValidUtf8("\xe2\x80"));           // truncated
  EXPECT_EQ(Latin1ToUtf8("caf\xe9 C\xe6sar"), "caf\xc3\xa9 C\xc3\xa6sar");
}

TEST(TextCleaningTest, StripsGutenbergLicence) {
  const std::string raw =
      "The Project Gutenberg EBook of Something, by Someone\r\n"
      "This eBook is for the use of anyone anywhere at no cost\r\n"
      "*** START OF THIS PROJECT GUTENBERG EBOOK SOMETHING ***\r\n"
      "\r\n"
      "Produced by a volunteer\r\n"
      "CHAPTER I\r\n\r\nIt was _very_ dark.\r\n"
      "[Illustration: a lamp]\r\n"
      "The <i>end</i>.\r\n"
      "End of the Project Gutenberg EBook of Something\r\n"
      "*** END OF THIS PROJECT GUTENBERG EBOOK SOMETHING ***\r\n"
      "Updated editions will replace the previous one.\r\n";
  EXPECT_EQ(CleanGutenbergText(raw),
            "Produced by a volunteer\nCHAPTER I\n\nIt was very dark.\n\nThe end.\n");
}

TEST(TextCleaningTest, StripsOldStyleSmallPrint) {
  const std::string footer =
      "[The Ball and The Cross by G.K. Chesterton 1909]\n\nHe looked about.\n\n\n"
      "End of Project Gutenberg's The Ball and The Cross, by G.K. Chesterton\n"
      "\n*** END OF THE PROJECT GUTENBERG EBOOK THE BALL AND THE CROSS ***\n"
      "***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN EBOOKS**START***\nlawyers\n"
      "*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*\n";
  EXPECT_EQ(CleanGutenbergText(footer),
            "[The Ball and The Cross by G.K. Chesterton 1909]\n\nHe looked about.\n");
  const std::string header =
      "**The Project Gutenberg Etext of Something**\n"
      "**Welcome To The World of Free Plain Vanilla Electronic Texts**\n"
      "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n"
      "Chapter 1\nOnce upon a time, in a land far away, there was a long\n"
      "story that went on and on, long enough to be the bulk of the file.\n";
  EXPECT_EQ(CleanGutenbergText(header),
            "Chapter 1\nOnce upon a time, in a land far away, there was a long\n"
            "story that went on and on, long enough to be the bulk of the file.\n");
}

TEST(TextCleaningTest, ConvertsLatin1Books) {
  EXPECT_EQ(CleanGutenbergText("Ant. C\xe6sar, my Lord\n"), "Ant. C\xc3\xa6sar, my Lord\n");
  // Valid UTF-8 is left alone.
  EXPECT_EQ(CleanGutenbergText("caf\xc3\xa9\n"), "caf\xc3\xa9\n");
}

TEST(TextCleaningTest, KeepsBookTextWithoutMarkers) {
  const std::string book = "[Emma by Jane Austen 1816]\n\nVOLUME I\n\nCHAPTER I\n";
  EXPECT_EQ(CleanGutenbergText(book), book);
  // "***" inside the text is not a marker; a stray '<' is not a tag.
  EXPECT_EQ(CleanGutenbergText("a tower*** in the\n***Near Kells\nx < y and y > z\n"),
            "a tower*** in the\n***Near Kells\nx < y and y > z\n");
}

TEST(TextCleaningTest, DropsAudienceNotesFromTranscripts) {
  EXPECT_EQ(CleanTranscriptText("Thank you. [Applause] We will [laughter] win. [1]\r\n"),
            "Thank you. We will win. [1]\n");
}

}  // namespace
}  // namespace smallem
