#include "corpus/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "corpus/pretokenizer.h"
#include "gtest/gtest.h"

namespace smallem {
namespace {

using Merges = std::vector<std::pair<int32_t, int32_t>>;

// BPE training by the definition: recount every pair of every chunk after
// each merge. Slow, obviously right.
Merges BruteForceTrain(const std::vector<std::string_view>& documents, int64_t vocab_size,
                       int64_t min_pair_count) {
  std::vector<std::vector<int32_t>> chunks;
  for (std::string_view document : documents) {
    ForEachChunk(document, [&](std::string_view chunk) {
      std::vector<int32_t> ids;
      for (char c : chunk) ids.push_back(static_cast<uint8_t>(c));
      chunks.push_back(ids);
    });
  }
  Merges merges;
  while (256 + static_cast<int64_t>(merges.size()) < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& ids : chunks) {
      for (size_t i = 0; i + 1 < ids.size(); ++i) ++counts[{ids[i], ids[i + 1]}];
    }
    std::pair<int32_t, int32_t> best;
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts) {  // ascending pairs: first max wins
      if (count > best_count) best = pair, best_count = count;
    }
    if (best_count < min_pair_count) break;
    const int32_t merged = 256 + static_cast<int32_t>(merges.size());
    merges.push_back(best);
    for (auto& ids : chunks) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == best.first && ids[i + 1] == best.second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(ids[i]);
        }
      }
      ids = out;
    }
  }
  return merges;
}

TEST(BpeTrainerTest, LearnsHandCheckedMerges) {
  // "aaabdaaabac" is one chunk. Pair counts: aa 4, ab 2, others 1 -> merge
  // (a, a) = 256. Then "aa" a b d "aa" a b a c: (256, a) 2 and (a, b) 2 tie,
  // the smaller pair (97, 98) wins -> 257. Then (256, 257) occurs twice ->
  // 258 = "aaab". Every pair left occurs once: training stops.
  auto tokenizer = TrainBpe({"aaabdaaabac"}, 1000);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->merges(), (Merges{{'a', 'a'}, {'a', 'b'}, {256, 257}}));
  EXPECT_EQ(tokenizer->vocab_size(), 259);
  EXPECT_EQ(tokenizer->TokenText(258), "aaab");
  EXPECT_EQ(tokenizer->Encode("aaabdaaabac"),
            (std::vector<int32_t>{258, 'd', 258, 'a', 'c'}));
}

TEST(BpeTrainerTest, TiesGoToTheSmallestPair) {
  // With pairs seen once allowed, the remaining pairs (258, d), (d, 258),
  // (258, a) and (a, c) all count 1: the smallest, (a, c), comes next.
  auto tokenizer = TrainBpe({"aaabdaaabac"}, 260, {}, {.min_pair_count = 1});
  ASSERT_TRUE(tokenizer.ok());
  ASSERT_EQ(tokenizer->num_merges(), 4);
  EXPECT_EQ(tokenizer->merges()[3], (std::pair<int32_t, int32_t>{'a', 'c'}));
}

TEST(BpeTrainerTest, MergesNeverCrossChunks) {
  // "a b" splits as "a", " b": the pair (a, ' ') is never counted.
  auto tokenizer = TrainBpe({"a b a b a b a b"}, 300);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(tokenizer->merges(), (Merges{{' ', 'b'}, {' ', 'a'}}));  // 4 then 3
}

TEST(BpeTrainerTest, MatchesBruteForceTraining) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 8; ++trial) {
    // Few letters and short words: many repeats, overlapping pairs ("aaaa",
    // "abab") and ties.
    std::vector<std::string> documents(3);
    for (std::string& document : documents) {
      for (int word = 0; word < 400; ++word) {
        const int length = 1 + rng() % 7;
        for (int i = 0; i < length; ++i) document.push_back("abcab"[rng() % (2 + trial % 4)]);
        document.push_back(" \n,"[rng() % 3]);
      }
    }
    std::vector<std::string_view> views(documents.begin(), documents.end());
    const int64_t min_count = 1 + trial % 2;
    auto tokenizer = TrainBpe(views, 256 + 120, {}, {.min_pair_count = min_count});
    ASSERT_TRUE(tokenizer.ok());
    EXPECT_EQ(tokenizer->merges(), BruteForceTrain(views, 256 + 120, min_count))
        << "trial " << trial;
  }
}

TEST(BpeTrainerTest, SameDocumentsInAnyOrderGiveSameMerges) {
  std::vector<std::string> documents = {
      "the quick brown fox jumps over the lazy dog",
      "she sells sea shells by the sea shore, the shells she sells",
      "peter piper picked a peck of pickled peppers",
      "how much wood would a woodchuck chuck if a woodchuck could chuck wood"};
  std::vector<std::string_view> views(documents.begin(), documents.end());
  auto first = TrainBpe(views, 320);
  auto again = TrainBpe(views, 320);
  std::reverse(views.begin(), views.end());
  auto reversed = TrainBpe(views, 320);
  ASSERT_TRUE(first.ok() && again.ok() && reversed.ok());
  EXPECT_GT(first->num_merges(), 10);
  EXPECT_EQ(first->merges(), again->merges());
  EXPECT_EQ(first->merges(), reversed->merges());
}

TEST(BpeTrainerTest, StopsAtTheRequestedVocabulary) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "lorem ipsum dolor sit amet consectetur " + std::to_string(i);
  auto tokenizer = TrainBpe({text}, 270);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(tokenizer->vocab_size(), 270);
  auto bytes_only = TrainBpe({text}, 256);
  ASSERT_TRUE(bytes_only.ok());
  EXPECT_EQ(bytes_only->vocab_size(), 256);
}

TEST(BpeTrainerTest, EmptyCorpusGivesByteTokenizer) {
  auto tokenizer = TrainBpe({}, 8192);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(tokenizer->vocab_size(), 256);
}

TEST(BpeTrainerTest, RejectsVocabularyBelowBytes) {
  auto tokenizer = TrainBpe({"abc"}, 255);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("255"), std::string::npos);
}

TEST(BpeTrainerTest, ReportsProgressToCompletion) {
  std::map<std::string, double> last;
  auto tokenizer = TrainBpe({"abab abab abab cdcd cdcd"}, 300,
                            [&](std::string_view stage, double fraction) {
                              EXPECT_GE(fraction, 0.0);
                              EXPECT_LE(fraction, 1.0);
                              last[std::string(stage)] = fraction;
                            });
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(last["count"], 1.0);
  EXPECT_EQ(last["merge"], 1.0);
}

}  // namespace
}  // namespace smallem
