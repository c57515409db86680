#include "corpus/pretokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace smallem {
namespace {

std::vector<std::string> Chunks(std::string_view text) {
  std::vector<std::string> chunks;
  ForEachChunk(text, [&](std::string_view chunk) { chunks.emplace_back(chunk); });
  return chunks;
}

using Strings = std::vector<std::string>;

TEST(PretokenizerTest, SplitsLikeGpt2) {
  EXPECT_EQ(Chunks("Hello world"), (Strings{"Hello", " world"}));
  EXPECT_EQ(Chunks("it's 42 apples!!"), (Strings{"it", "'s", " 42", " apples", "!!"}));
  EXPECT_EQ(Chunks("we'll they're I've"),
            (Strings{"we", "'ll", " they", "'re", " I", "'ve"}));
  EXPECT_EQ(Chunks("abc123def"), (Strings{"abc", "123", "def"}));
  EXPECT_EQ(Chunks("x = (y);"), (Strings{"x", " =", " (", "y", ");"}));
}

TEST(PretokenizerTest, LeavesLastSpaceOfARunToTheNextWord) {
  EXPECT_EQ(Chunks("a   b"), (Strings{"a", "  ", " b"}));
  EXPECT_EQ(Chunks("a\n\nb"), (Strings{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Chunks("a\n\n b"), (Strings{"a", "\n\n", " b"}));
  EXPECT_EQ(Chunks("end  \n"), (Strings{"end", "  \n"}));
  EXPECT_EQ(Chunks(" "), (Strings{" "}));
}

TEST(PretokenizerTest, KeepsUtf8LettersTogether) {
  EXPECT_EQ(Chunks("caf\xc3\xa9 na\xc3\xafve"), (Strings{"caf\xc3\xa9", " na\xc3\xafve"}));
}

TEST(PretokenizerTest, CutsLongRuns) {
  const std::string letters(1000, 'x');
  Strings chunks = Chunks(letters);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].size(), kMaxChunkBytes);
  EXPECT_EQ(chunks[3].size(), 1000 - 3 * kMaxChunkBytes);
}

TEST(PretokenizerTest, ChunksCoverAnyBytesExactly) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text(rng() % 700, '\0');
    for (char& c : text) c = static_cast<char>(rng() % (trial % 2 ? 256 : 40));
    std::string joined;
    ForEachChunk(text, [&](std::string_view chunk) {
      ASSERT_FALSE(chunk.empty());
      ASSERT_LE(chunk.size(), kMaxChunkBytes);
      joined.append(chunk);
    });
    ASSERT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace smallem
