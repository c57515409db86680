#include "corpus/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "gtest/gtest.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

// A document as stored in a split: ending with a newline, then a blank line.
std::string Stored(const std::string& document) {
  return document + (document.ends_with('\n') ? "\n" : "\n\n");
}

void WriteFile(const fs::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// A document of English-looking text with a marker word only it contains.
std::string MakeDocument(int index, std::mt19937& rng) {
  static const char* kWords[] = {"the", "of", "and", "a", "to", "in", "is", "was",
                                 "that", "for", "it", "with", "as", "his", "on", "be",
                                 "garden", "river", "morning", "letter", "house"};
  std::string text = "Document marker" + std::string(1, static_cast<char>('A' + index)) + ".\n";
  for (int sentence = 0; sentence < 60; ++sentence) {
    const int length = 4 + rng() % 10;
    for (int w = 0; w < length; ++w) {
      text += (w == 0 ? "" : " ");
      text += kWords[rng() % std::size(kWords)];
    }
    text += rng() % 4 == 0 ? ".\n\n" : ". ";
  }
  return text;
}

class DatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) /
            ("dataset_test_" +
             std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::mt19937 rng(42);
    for (int i = 0; i < 8; ++i) {
      documents_.push_back(MakeDocument(i, rng));
      const fs::path path = root_ / ("doc" + std::to_string(i) + ".txt");
      WriteFile(path, documents_.back());
      files_.push_back(path.string());
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  PrepareOptions Options(const std::string& out = "data") {
    PrepareOptions options;
    options.files = files_;
    options.vocab = 320;
    options.out_dir = (root_ / out).string();
    options.val_fraction = 0.25;
    return options;
  }

  // Prepares the default dataset of the fixture; returns its directory.
  fs::path Prepare() {
    const PrepareOptions options = Options();
    const absl::Status status = PrepareDataset(options);
    EXPECT_TRUE(status.ok()) << status;
    return options.out_dir;
  }

  void ExpectOpenFails(const fs::path& dir, absl::StatusCode code,
                       const std::string& expected, bool verify_hashes = true) {
    auto dataset = Dataset::Open(dir.string(), verify_hashes);
    EXPECT_EQ(dataset.status().code(), code) << dataset.status();
    EXPECT_NE(dataset.status().message().find(expected), std::string::npos)
        << dataset.status().message();
  }

  fs::path root_;
  std::vector<std::string> documents_;
  std::vector<std::string> files_;
};

TEST_F(DatasetTest, PreparedDatasetOpens) {
  std::map<std::string, double> progress;
  PrepareOptions options = Options();
  ASSERT_TRUE(PrepareDataset(options, [&](std::string_view stage, double fraction) {
                progress[std::string(stage)] = fraction;
              }).ok());
  for (const char* stage : {"count", "merge", "encode", "write"}) {
    EXPECT_EQ(progress[stage], 1.0) << stage;
  }
  for (const char* file : {"tokenizer.json", "train.bin", "val.bin", "meta.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(options.out_dir) / file)) << file;
  }
  auto dataset = Dataset::Open(options.out_dir);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->vocab(), 320);
  EXPECT_FALSE(dataset->train.empty());
  EXPECT_FALSE(dataset->val.empty());
  EXPECT_EQ(fs::file_size(fs::path(options.out_dir) / "train.bin"), dataset->train.size() * 2);
}

TEST_F(DatasetTest, ProgressNeverPassesTheWhole) {
  std::map<std::string, double> highest;
  ASSERT_TRUE(PrepareDataset(Options(), [&](std::string_view stage, double fraction) {
                double& h = highest[std::string(stage)];
                h = std::max(h, fraction);
              }).ok());
  ASSERT_FALSE(highest.empty());
  for (const auto& [stage, fraction] : highest) EXPECT_LE(fraction, 1.0) << stage;
}

TEST_F(DatasetTest, MetaDescribesTheFiles) {
  const fs::path dir = Prepare();
  auto dataset = Dataset::Open(dir.string());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const nlohmann::json& meta = dataset->meta;
  EXPECT_EQ(meta["vocab"], 320);
  EXPECT_EQ(meta["train_tokens"], dataset->train.size());
  EXPECT_EQ(meta["val_tokens"], dataset->val.size());
  int64_t train_bytes = 0, val_bytes = 0;
  for (uint16_t id : dataset->train) train_bytes += dataset->tokenizer.token_bytes()[id];
  for (uint16_t id : dataset->val) val_bytes += dataset->tokenizer.token_bytes()[id];
  EXPECT_EQ(meta["train_bytes"], train_bytes);
  EXPECT_EQ(meta["val_bytes"], val_bytes);
  EXPECT_NEAR(meta["bytes_per_token"].get<double>(),
              static_cast<double>(train_bytes + val_bytes) /
                  (dataset->train.size() + dataset->val.size()),
              1e-9);
  EXPECT_GT(meta["bytes_per_token"].get<double>(), 1.5);
  EXPECT_EQ(meta["train_documents"], 6);
  EXPECT_EQ(meta["val_documents"], 2);
  EXPECT_NE(meta["source"].get<std::string>().find("doc0.txt"), std::string::npos);
  for (const char* file : {"tokenizer.json", "train.bin", "val.bin"}) {
    EXPECT_EQ(meta["sha256"][file], *Sha256FileHex((dir / file).string())) << file;
  }
  EXPECT_EQ(meta["content_hash"],
            DatasetContentHash(meta["sha256"]["tokenizer.json"].get<std::string>(),
                               meta["sha256"]["train.bin"].get<std::string>(),
                               meta["sha256"]["val.bin"].get<std::string>()));
  EXPECT_EQ(dataset->content_hash(), meta["content_hash"]);
}

TEST_F(DatasetTest, ContentHashIsWhatSha256sumGives) {
  // `sha256sum tokenizer.json train.bin val.bin | sha256sum`
  EXPECT_EQ(DatasetContentHash("aa", "bb", "cc"),
            Sha256Hex("aa  tokenizer.json\nbb  train.bin\ncc  val.bin\n"));
}

TEST_F(DatasetTest, ValidationIsHeldOutByDocument) {
  const fs::path dir = Prepare();
  auto dataset = Dataset::Open(dir.string());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::vector<int32_t> train_ids(dataset->train.begin(), dataset->train.end());
  const std::vector<int32_t> val_ids(dataset->val.begin(), dataset->val.end());
  const std::string train = dataset->tokenizer.Decode(train_ids);
  const std::string val = dataset->tokenizer.Decode(val_ids);
  // Every document is whole in exactly one split, followed by a blank line.
  int in_val = 0;
  std::string expected_val;
  for (size_t i = 0; i < documents_.size(); ++i) {
    const std::string& document = documents_[i];
    const bool is_val = val.find(document) != std::string::npos;
    const bool is_train = train.find(document) != std::string::npos;
    EXPECT_NE(is_val, is_train) << "document " << i;
    const std::string marker = document.substr(0, document.find('\n'));
    EXPECT_EQ(val.find(marker) != std::string::npos, is_val);
    EXPECT_EQ(train.find(marker) != std::string::npos, is_train);
    if (is_val) {
      ++in_val;
      expected_val += Stored(document);
    }
  }
  EXPECT_EQ(in_val, 2);
  EXPECT_EQ(val, expected_val);
  EXPECT_EQ(train.size() + val.size(), [&] {
    size_t total = 0;
    for (const std::string& document : documents_) total += Stored(document).size();
    return total;
  }());
  const nlohmann::json& names = dataset->meta["val_document_names"];
  ASSERT_EQ(names.size(), 2u);
}

TEST_F(DatasetTest, SameInputGivesSameDataset) {
  ASSERT_TRUE(PrepareDataset(Options("first")).ok());
  ASSERT_TRUE(PrepareDataset(Options("second")).ok());
  auto first = Dataset::Open((root_ / "first").string());
  auto second = Dataset::Open((root_ / "second").string());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->content_hash(), second->content_hash());
  EXPECT_EQ(first->content_hash().size(), 64u);
  EXPECT_EQ(first->train, second->train);
}

TEST_F(DatasetTest, RejectsVocabularyOutOfRange) {
  for (int64_t vocab : {int64_t{100}, int64_t{255}, int64_t{65537}, int64_t{100000}}) {
    PrepareOptions options = Options();
    options.vocab = vocab;
    const absl::Status status = PrepareDataset(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("[256, 65536]"), std::string::npos) << status;
  }
  PrepareOptions largest = Options();
  largest.vocab = 65536;  // allowed (stops early on this small corpus)
  EXPECT_TRUE(PrepareDataset(largest).ok());
}

TEST_F(DatasetTest, RejectsASingleDocument) {
  PrepareOptions options = Options();
  options.files = {files_[0]};
  const absl::Status status = PrepareDataset(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("at least 2"), std::string::npos) << status;
}

TEST_F(DatasetTest, MissingCorpusFileIsNamed) {
  PrepareOptions options = Options();
  options.files.push_back((root_ / "missing.txt").string());
  const absl::Status status = PrepareDataset(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("missing.txt"), std::string::npos);
}

TEST_F(DatasetTest, OpenOfMissingDirectorySaysHowToMakeOne) {
  ExpectOpenFails(root_ / "nowhere", absl::StatusCode::kNotFound, "smallemctl data prepare");
}

TEST_F(DatasetTest, OpenWithoutMetaIsIncomplete) {
  const fs::path dir = Prepare();
  fs::remove(dir / "meta.json");
  ExpectOpenFails(dir, absl::StatusCode::kNotFound, "meta.json");
}

TEST_F(DatasetTest, OpenNamesAMissingFile) {
  const fs::path dir = Prepare();
  fs::remove(dir / "val.bin");
  ExpectOpenFails(dir, absl::StatusCode::kNotFound, "val.bin");
}

TEST_F(DatasetTest, OpenRejectsCorruptMeta) {
  const fs::path dir = Prepare();
  WriteFile(dir / "meta.json", "{\"vocab\": 32");
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "meta.json: not valid JSON");
  WriteFile(dir / "meta.json", "{\"vocab\": 320}");
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "train_tokens");
}

TEST_F(DatasetTest, OpenRejectsTruncatedTokenFile) {
  const fs::path dir = Prepare();
  std::string train = ReadFile(dir / "train.bin");
  WriteFile(dir / "train.bin", train.substr(0, train.size() - 1));
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "train.bin: size", false);
  WriteFile(dir / "train.bin", train.substr(0, train.size() - 2));
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "train.bin: holds", false);
}

TEST_F(DatasetTest, OpenDetectsChangedBytes) {
  const fs::path dir = Prepare();
  std::string val = ReadFile(dir / "val.bin");
  std::swap(val[0], val[2]);
  std::swap(val[1], val[3]);
  ASSERT_NE(val, ReadFile(dir / "val.bin"));
  WriteFile(dir / "val.bin", val);
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "val.bin: SHA-256 differs");
  // Without hash checks the (still valid) ids load.
  EXPECT_TRUE(Dataset::Open(dir.string(), /*verify_hashes=*/false).ok());
}

TEST_F(DatasetTest, OpenRejectsIdsOutsideTheVocabulary) {
  const fs::path dir = Prepare();
  std::string val = ReadFile(dir / "val.bin");
  val[4] = '\xff';
  val[5] = '\xff';
  WriteFile(dir / "val.bin", val);
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "val.bin: token 2 is id 65535", false);
}

TEST_F(DatasetTest, OpenRejectsCorruptTokenizer) {
  const fs::path dir = Prepare();
  WriteFile(dir / "tokenizer.json", "{\"type\": \"byte_bpe\", \"merges\": [[1,");
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "tokenizer.json: SHA-256 differs");
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "tokenizer.json: not valid JSON", false);
  WriteFile(dir / "tokenizer.json", "{\"type\": \"byte_bpe\", \"merges\": [[1, 2]]}");
  ExpectOpenFails(dir, absl::StatusCode::kDataLoss, "vocab is 320", false);
}

}  // namespace
}  // namespace smallem
