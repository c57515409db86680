#include "corpus/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "corpus/bpe_trainer.h"
#include "corpus/pretokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

constexpr char kSample[] =
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife. However little known the feelings or views of "
    "such a man may be on his first entering a neighbourhood, this truth is so well fixed "
    "in the minds of the surrounding families, that he is considered the rightful property "
    "of some one or other of their daughters.\n\n\"My dear Mr. Bennet,\" said his lady to "
    "him one day, \"have you heard that Netherfield Park is let at last?\"\n"
    "Mr. Bennet replied that he had not. 1811, 1812, 1813: the years went by.\n"
    "Caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 r\xc3\xa9sum\xc3\xa9.   Tabs\tand  spaces.\n";

// A tokenizer trained on 20 copies of the sample (asked for 600 ids, it stops
// earlier, once every word is one token and no pair is left to merge).
const Tokenizer& TrainedTokenizer() {
  static const Tokenizer* tokenizer = [] {
    std::vector<std::string> documents;
    for (int i = 0; i < 20; ++i) documents.push_back(std::string(kSample) + std::to_string(i));
    std::vector<std::string_view> views(documents.begin(), documents.end());
    auto trained = TrainBpe(views, 600);
    CHECK(trained.ok());
    return new Tokenizer(*std::move(trained));
  }();
  return *tokenizer;
}

// Encoding by the definition: within each chunk, repeatedly merge the
// lowest-ranked adjacent pair everywhere, left to right.
std::vector<int32_t> ReferenceEncode(const Tokenizer& tokenizer, std::string_view text) {
  std::map<std::pair<int32_t, int32_t>, int32_t> rank;
  for (size_t k = 0; k < tokenizer.merges().size(); ++k) {
    rank.emplace(tokenizer.merges()[k], static_cast<int32_t>(k));
  }
  std::vector<int32_t> out;
  ForEachChunk(text, [&](std::string_view chunk) {
    std::vector<int32_t> ids;
    for (char c : chunk) ids.push_back(static_cast<uint8_t>(c));
    for (;;) {
      int32_t best = INT32_MAX;
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        auto it = rank.find({ids[i], ids[i + 1]});
        if (it != rank.end()) best = std::min(best, it->second);
      }
      if (best == INT32_MAX) break;
      const auto [a, b] = tokenizer.merges()[best];
      std::vector<int32_t> merged;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
          merged.push_back(256 + best);
          ++i;
        } else {
          merged.push_back(ids[i]);
        }
      }
      ids = merged;
    }
    out.insert(out.end(), ids.begin(), ids.end());
  });
  return out;
}

std::string RandomBytes(std::mt19937& rng, size_t length, int alphabet) {
  static constexpr char kTextish[] = "aeiou tnshrdl\n,.'TEH\t0123456789";
  std::string text(length, '\0');
  for (char& c : text) {
    switch (alphabet) {
      case 0:  // any byte
        c = static_cast<char>(rng() & 0xff);
        break;
      case 1:  // text-like ASCII
        c = kTextish[rng() % (sizeof(kTextish) - 1)];
        break;
      default:  // mostly bytes >= 0x80: invalid UTF-8 and stray continuation bytes
        c = static_cast<char>(rng() % 4 == 0 ? 'a' + rng() % 3 : 0x80 + rng() % 128);
    }
  }
  return text;
}

std::string TempPath(const std::string& name) { return testing::TempDir() + "/" + name; }

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

TEST(TokenizerTest, WithoutMergesEncodesEachByte) {
  Tokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 256);
  EXPECT_EQ(tokenizer.Encode("hi!"), (std::vector<int32_t>{'h', 'i', '!'}));
  EXPECT_EQ(tokenizer.Encode("\xff"), (std::vector<int32_t>{255}));
}

TEST(TokenizerTest, MergedTokensConcatenateTheirBytes) {
  // 256 = "a" + "b", 257 = "ab" + "c", 258 = " " + "ab"
  Tokenizer tokenizer = Tokenizer::FromMerges({{'a', 'b'}, {256, 'c'}, {' ', 256}});
  EXPECT_EQ(tokenizer.vocab_size(), 259);
  EXPECT_EQ(tokenizer.TokenText(257), "abc");
  EXPECT_EQ(tokenizer.token_bytes()[257], 3);
  EXPECT_EQ(tokenizer.Encode("abc ab abx"),
            (std::vector<int32_t>{257, 258, 258, 'x'}));
  EXPECT_EQ(tokenizer.Decode(std::vector<int32_t>{257, 258}), "abc ab");
}

TEST(TokenizerTest, MergesRepeatedBytesLeftToRight) {
  Tokenizer tokenizer = Tokenizer::FromMerges({{'a', 'a'}});
  EXPECT_EQ(tokenizer.Encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(tokenizer.Encode("aaaa"), (std::vector<int32_t>{256, 256}));
}

TEST(TokenizerTest, LowerRankedMergeWinsOverEarlierPosition) {
  // "bc" (rank 0) is applied before "ab" (rank 1) although "ab" comes first.
  Tokenizer tokenizer = Tokenizer::FromMerges({{'b', 'c'}, {'a', 'b'}});
  EXPECT_EQ(tokenizer.Encode("abc"), (std::vector<int32_t>{'a', 256}));
}

TEST(TokenizerTest, EmptyInputRoundTrips) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  EXPECT_TRUE(tokenizer.Encode("").empty());
  EXPECT_EQ(tokenizer.Decode({}), "");
}

TEST(TokenizerTest, RandomBytesRoundTrip) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 600; ++trial) {
    const std::string text = RandomBytes(rng, rng() % 1500, trial % 3);
    const std::vector<int32_t> ids = tokenizer.Encode(text);
    ASSERT_EQ(tokenizer.Decode(ids), text) << "trial " << trial;
    for (int32_t id : ids) ASSERT_LT(id, tokenizer.vocab_size());
  }
}

TEST(TokenizerTest, InvalidUtf8RoundTrips) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  for (std::string text :
       {std::string("\xc3"), std::string("caf\xc3"), std::string("\x80\x80\x80 abc"),
        std::string("\xed\xa0\x80 surrogate"), std::string("\xf8\x88\x80\x80\x80"),
        std::string("nul\0byte\0", 9), std::string("\xff\xfe the \xfe\xff")}) {
    EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text)), text);
  }
}

TEST(TokenizerTest, LongInputsRoundTrip) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  std::mt19937 rng(99);
  std::string text;
  while (text.size() < 2'000'000) {
    switch (rng() % 5) {
      case 0:
        text.append(kSample);
        break;
      case 1:
        text.append(rng() % 5000, ' ');  // long whitespace runs
        break;
      case 2:
        text.append(rng() % 5000, 'e');  // a long "word"
        break;
      case 3:
        text.append(rng() % 3000, '\n');
        break;
      default:
        text.append(RandomBytes(rng, rng() % 5000, rng() % 3));
    }
  }
  const std::vector<int32_t> ids = tokenizer.Encode(text);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tokenizer.Decode(ids), text);
}

TEST(TokenizerTest, EncodeMatchesReferenceAlgorithm) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text = trial % 2 ? RandomBytes(rng, rng() % 600, 1)
                                 : std::string(kSample).substr(rng() % 200);
    ASSERT_EQ(tokenizer.Encode(text), ReferenceEncode(tokenizer, text)) << text;
  }
  const std::string long_text = std::string(kSample) + std::string(700, 'e') + kSample;
  EXPECT_EQ(tokenizer.Encode(long_text), ReferenceEncode(tokenizer, long_text));
}

TEST(TokenizerTest, EncodeAllEqualsEncodeOfEach) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  std::vector<std::string_view> texts = {kSample, "the the the", "", "Bennet"};
  std::vector<int32_t> expected;
  for (std::string_view text : texts) {
    std::vector<int32_t> ids = tokenizer.Encode(text);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(tokenizer.EncodeAll(texts), expected);
}

TEST(TokenizerTest, TrainedTokenizerCompressesItsText) {
  const Tokenizer& tokenizer = TrainedTokenizer();
  EXPECT_GT(tokenizer.vocab_size(), 400);
  EXPECT_LE(tokenizer.vocab_size(), 600);
  const std::vector<int32_t> ids = tokenizer.Encode(kSample);
  EXPECT_LT(ids.size() * 3, sizeof(kSample));
}

TEST(TokenizerTest, TokenBytesMatchTokenText) {
  Tokenizer tokenizer = TrainedTokenizer();
  const int64_t vocab = tokenizer.vocab_size();
  const int32_t special = tokenizer.AddSpecial("<|endoftext|>");
  EXPECT_EQ(special, vocab);
  EXPECT_EQ(tokenizer.vocab_size(), vocab + 1);
  ASSERT_EQ(static_cast<int64_t>(tokenizer.token_bytes().size()), vocab + 1);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    EXPECT_EQ(tokenizer.token_bytes()[id], static_cast<int32_t>(tokenizer.TokenText(id).size()));
  }
  EXPECT_EQ(tokenizer.token_bytes()[special], 0);
  EXPECT_EQ(tokenizer.Decode(std::vector<int32_t>{'a', special, 'b'}), "ab");
  // Text that spells a special token is still encoded as text.
  for (int32_t id : tokenizer.Encode("<|endoftext|>")) EXPECT_NE(id, special);
}

TEST(TokenizerTest, SaveThenLoadEncodesIdentically) {
  Tokenizer tokenizer = TrainedTokenizer();
  tokenizer.AddSpecial("<|endoftext|>");
  const std::string path = TempPath("tokenizer_roundtrip.json");
  ASSERT_TRUE(tokenizer.Save(path).ok());
  auto loaded = Tokenizer::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->vocab_size(), tokenizer.vocab_size());
  EXPECT_EQ(loaded->merges(), tokenizer.merges());
  EXPECT_EQ(loaded->specials(), tokenizer.specials());
  EXPECT_EQ(loaded->token_bytes(), tokenizer.token_bytes());
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const std::string text = RandomBytes(rng, rng() % 800, trial % 3) + kSample;
    ASSERT_EQ(loaded->Encode(text), tokenizer.Encode(text));
  }
  std::remove(path.c_str());
}

TEST(TokenizerTest, SavedFileHasTheDocumentedFormat) {
  Tokenizer tokenizer = Tokenizer::FromMerges({{'a', 'b'}, {256, 'c'}});
  tokenizer.AddSpecial("<|endoftext|>");
  const nlohmann::json json = tokenizer.ToJson();
  EXPECT_EQ(json["type"], "byte_bpe");
  EXPECT_EQ(json["merges"], nlohmann::json::parse("[[97, 98], [256, 99]]"));
  EXPECT_EQ(json["special"], nlohmann::json::parse(R"({"<|endoftext|>": 258})"));
}

TEST(TokenizerTest, LoadOfMissingFileNamesIt) {
  auto loaded = Tokenizer::Load("/nonexistent/tokenizer.json");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(TokenizerTest, LoadRejectsCorruptFiles) {
  const std::string path = TempPath("tokenizer_corrupt.json");
  struct Case {
    std::string contents;
    std::string expected_message;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"type\": \"byte_bpe\", \"merges\": [[97, 9", "not valid JSON"},
           {"[1, 2]", "expected a JSON object"},
           {R"({"type": "wordpiece", "merges": []})", "\"wordpiece\""},
           {R"({"type": "byte_bpe"})", "\"merges\""},
           {R"({"type": "byte_bpe", "merges": [[97, 98], [300, 1]]})", "merge 1"},
           {R"({"type": "byte_bpe", "merges": [[97, -1]]})", "merge 0"},
           {R"({"type": "byte_bpe", "merges": [[97, 98], [97, 98]]})", "repeats merge 0"},
           {R"({"type": "byte_bpe", "merges": [[97]]})", "expected [a, b]"},
           {R"({"type": "byte_bpe", "merges": [], "special": {"<s>": 300}})", "<s>"},
       }) {
    WriteFile(path, c.contents);
    auto loaded = Tokenizer::Load(path);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << c.contents;
    EXPECT_NE(loaded.status().message().find(c.expected_message), std::string::npos)
        << loaded.status().message();
    EXPECT_NE(loaded.status().message().find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace smallem
