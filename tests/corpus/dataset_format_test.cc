#include "corpus/dataset_format.h"

#include <string>

#include "base/sha256.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

class VerifyDatasetHashesTest : public ::testing::Test {
 protected:
  VerifyDatasetHashesTest()
      : files_{.tokenizer = Sha256Hex("tokenizer"),
               .train = Sha256Hex("train"),
               .val = Sha256Hex("val")},
        content_hash_(DatasetContentHash(files_.tokenizer, files_.train, files_.val)),
        meta_{{"vocab", 300},
              {"sha256",
               {{"tokenizer.json", files_.tokenizer},
                {"train.bin", files_.train},
                {"val.bin", files_.val}}},
              {"content_hash", content_hash_}} {}

  // Expects DataLoss with every one of `parts` in the message.
  static void ExpectLoss(const absl::Status& status, std::initializer_list<std::string> parts) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    for (const std::string& part : parts) {
      EXPECT_NE(status.message().find(part), std::string::npos) << part << " in " << status;
    }
  }

  DatasetFileHashes files_;
  std::string content_hash_;
  nlohmann::json meta_;
};

TEST_F(VerifyDatasetHashesTest, MatchingFilesPass) {
  EXPECT_TRUE(VerifyDatasetHashes(meta_, files_).ok());
  EXPECT_TRUE(VerifyDatasetHashes(meta_, files_, content_hash_).ok());
}

TEST_F(VerifyDatasetHashesTest, ChangedFileIsNamedWithBothHashes) {
  DatasetFileHashes changed = files_;
  changed.val = Sha256Hex("tampered");
  ExpectLoss(VerifyDatasetHashes(meta_, changed),
             {"val.bin: SHA-256 differs", changed.val, files_.val});
}

TEST_F(VerifyDatasetHashesTest, MetaWithoutAHashIsRejected) {
  meta_["sha256"].erase("train.bin");
  ExpectLoss(VerifyDatasetHashes(meta_, files_), {"meta.json", "train.bin"});
  meta_.erase("sha256");
  ExpectLoss(VerifyDatasetHashes(meta_, files_), {"meta.json", "\"sha256\""});
  const nlohmann::json unparsable = nlohmann::json::parse("{", nullptr, false);
  ExpectLoss(VerifyDatasetHashes(unparsable, files_), {"meta.json"});
}

TEST_F(VerifyDatasetHashesTest, RecordedContentHashMustMatchTheFiles) {
  meta_["content_hash"] = std::string(64, '0');
  ExpectLoss(VerifyDatasetHashes(meta_, files_), {"content_hash", content_hash_});
}

TEST_F(VerifyDatasetHashesTest, ContentHashMustBeTheExpectedOne) {
  const std::string other(64, 'a');
  ExpectLoss(VerifyDatasetHashes(meta_, files_, other), {content_hash_, other});
}

}  // namespace
}  // namespace smallem
