#include "base/sha256.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

// FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA256_2.pdf") and the
// one-million-'a' vector of the NIST test suite.
TEST(Sha256Test, MatchesNistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                      "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, PieceByPieceEqualsAllAtOnce) {
  std::string message;
  for (int i = 0; i < 300; ++i) message.push_back(static_cast<char>(i * 37 + 11));
  // Every length around the padding boundaries (55, 56, 63, 64, 119, 120...)
  // and every split point of the message.
  for (size_t length = 0; length <= message.size(); ++length) {
    const std::string prefix = message.substr(0, length);
    const std::string expected = Sha256Hex(prefix);
    for (size_t split : {size_t{0}, length / 3, length / 2, length}) {
      Sha256 sha;
      sha.Update(prefix.substr(0, split));
      sha.Update(prefix.substr(split));
      ASSERT_EQ(Sha256::ToHex(sha.Finish()), expected) << length << " split at " << split;
    }
  }
}

TEST(Sha256Test, HashesFiles) {
  const std::string path = testing::TempDir() + "/sha256_test_file";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fputs("abc", file);
  std::fclose(file);
  auto hex = Sha256FileHex(path);
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ(*hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::remove(path.c_str());
}

TEST(Sha256Test, MissingFileIsNotFound) {
  auto hex = Sha256FileHex("/nonexistent/dir/file.bin");
  EXPECT_EQ(hex.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(hex.status().message().find("/nonexistent/dir/file.bin"), std::string::npos);
}

}  // namespace
}  // namespace smallem
