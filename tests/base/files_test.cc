#include "base/files.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "smallem_files_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // The names in the test directory, sorted.
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(FilesTest, WrittenContentsReadBack) {
  const std::string binary("a\0b\n\xff", 5);
  ASSERT_TRUE(WriteFileDurably(Path("f.bin"), binary).ok());
  absl::StatusOr<std::string> read = ReadFile(Path("f.bin"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, binary);

  ASSERT_TRUE(WriteFileDurably(Path("empty"), "").ok());
  EXPECT_EQ(ReadFile(Path("empty")).value_or("?"), "");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"empty", "f.bin"}));
}

TEST_F(FilesTest, LargeContentsReadBack) {
  std::string large(3 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7919 % 251);
  ASSERT_TRUE(WriteFileDurably(Path("large"), large).ok());
  EXPECT_EQ(ReadFile(Path("large")).value_or(""), large);
}

TEST_F(FilesTest, WriteReplacesAnExistingFile) {
  ASSERT_TRUE(WriteFileDurably(Path("f"), "a much longer first version\n").ok());
  ASSERT_TRUE(WriteFileDurably(Path("f"), "second\n").ok());
  EXPECT_EQ(ReadFile(Path("f")).value_or(""), "second\n");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(FilesTest, PiecesAreWrittenInOrder) {
  const std::string tensor(100000, 'x');
  ASSERT_TRUE(WriteFileDurably(Path("f"), {"head", "", tensor, "tail"}).ok());
  EXPECT_EQ(ReadFile(Path("f")).value_or(""), "head" + tensor + "tail");
}

TEST_F(FilesTest, WriteIntoAMissingDirectoryFailsAndLeavesNoTemporary) {
  const std::string path = Path("missing/f");
  const absl::Status status = WriteFileDurably(path, "contents");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_NE(status.message().find("No such file or directory"), std::string::npos) << status;
  EXPECT_TRUE(Entries().empty());
}

TEST_F(FilesTest, FailedRenameLeavesTheTargetAndNoTemporary) {
  // A non-empty directory under the name: the temporary is written, then the
  // rename fails.
  ASSERT_TRUE(fs::create_directory(Path("taken")));
  ASSERT_TRUE(WriteFileDurably(Path("taken/inside"), "x").ok());
  const absl::Status status = WriteFileDurably(Path("taken"), "contents");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rename"), std::string::npos) << status;
  EXPECT_EQ(Entries(), std::vector<std::string>{"taken"});
  EXPECT_EQ(ReadFile(Path("taken/inside")).value_or(""), "x");
}

TEST_F(FilesTest, SyncToDiskTakesFilesAndDirectories) {
  ASSERT_TRUE(WriteFileDurably(Path("f"), "x").ok());
  EXPECT_TRUE(SyncToDisk(Path("f")).ok());
  EXPECT_TRUE(SyncToDisk(dir_.string()).ok());
  const absl::Status missing = SyncToDisk(Path("missing"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find(Path("missing")), std::string::npos) << missing;
}

TEST_F(FilesTest, ReadOfAMissingFileNamesIt) {
  const std::string path = Path("nothing.json");
  absl::StatusOr<std::string> read = ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
  EXPECT_NE(read.status().message().find("No such file or directory"), std::string::npos)
      << read.status();
}

TEST_F(FilesTest, ReadOfADirectoryFails) {
  absl::StatusOr<std::string> read = ReadFile(dir_.string());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_NE(read.status().message().find(dir_.string()), std::string::npos) << read.status();
}

TEST_F(FilesTest, RenameDurablyMovesADirectoryIntoPlace) {
  fs::create_directory(Path("partial"));
  ASSERT_TRUE(WriteFileDurably(Path("partial/meta.json"), "{}").ok());
  ASSERT_TRUE(RenameDurably(Path("partial"), Path("final")).ok());
  EXPECT_EQ(*ReadFile(Path("final/meta.json")), "{}");
  EXPECT_EQ(Entries(), std::vector<std::string>{"final"});
}

TEST_F(FilesTest, RenameDurablyOfAMissingSourceNamesBothPaths) {
  const absl::Status status = RenameDurably(Path("missing"), Path("to"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find(Path("missing")), std::string::npos) << status;
  EXPECT_NE(status.message().find(Path("to")), std::string::npos) << status;
}

TEST_F(FilesTest, ChunksWrittenOutOfOrderMakeTheWholeFile) {
  ASSERT_TRUE(WriteFileChunk(Path("f"), 5, "world").ok());
  ASSERT_TRUE(WriteFileChunk(Path("f"), 0, "hello").ok());
  EXPECT_EQ(*ReadFile(Path("f")), "helloworld");
  EXPECT_EQ(WriteFileChunk(Path("f"), -1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteFileChunk(Path("no/such/dir/f"), 0, "x").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace smallem
