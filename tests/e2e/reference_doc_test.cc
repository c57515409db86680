// docs/reference.md against the code: every flag that `smallemctl VERB
// --help` lists (the real binary, every verb it names) and every key the
// grid parser knows has its row, and every twin the run-spec table names
// exists. One table for people, checked against the two lists it mirrors.
#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runspec/grid_parser.h"
#include "tests/e2e/e2e_support.h"

namespace smallem {
namespace {

// One heading of the document and the rows of the tables under it.
struct Section {
  std::string heading;
  std::vector<std::vector<std::string>> rows;  // header row first; cells trimmed
};

std::vector<Section> ReadReference() {
  std::ifstream in(std::string(SMALLEM_SOURCE_DIR) + "/docs/reference.md");
  std::vector<Section> sections;
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "#")) {
      sections.push_back({line, {}});
    } else if (absl::StartsWith(line, "|") && !absl::StartsWith(line, "|---") &&
               !sections.empty()) {
      // "\|" inside a cell is a literal bar, not a column.
      const std::string text = absl::StrReplaceAll(line, {{"\\|", "\x01"}});
      std::vector<std::string> cells = absl::StrSplit(text, '|');
      std::vector<std::string> row;
      for (size_t i = 1; i + 1 < cells.size(); ++i) {
        row.push_back(std::string(absl::StripAsciiWhitespace(cells[i])));
      }
      sections.back().rows.push_back(row);
    }
  }
  return sections;
}

// The long flags of one --help text ("  -h,--help", "  --data TEXT"), but
// --help itself, which every verb has.
std::vector<std::string> FlagsOf(const std::string& help) {
  std::vector<std::string> flags;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (!absl::StartsWith(line, "  -")) continue;
    const absl::string_view names = line.substr(2, line.find(' ', 2) - 2);
    for (absl::string_view name : absl::StrSplit(names, ',')) {
      if (absl::StartsWith(name, "--") && name != "--help") flags.emplace_back(name);
    }
  }
  return flags;
}

// The verbs under "Subcommands:" of one --help text.
std::vector<std::string> VerbsOf(const std::string& help) {
  std::vector<std::string> verbs;
  bool in_list = false;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (line == "Subcommands:") {
      in_list = true;
    } else if (in_list && absl::StartsWith(line, "  ") && line.size() > 2 &&
               absl::ascii_isalpha(line[2])) {
      verbs.emplace_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list && line.empty()) {
      in_list = false;
    }
  }
  return verbs;
}

std::string Help(const std::string& verb) {
  std::vector<std::string> args = absl::StrSplit(verb, ' ', absl::SkipEmpty());
  args.push_back("--help");
  testing::CtlOutput o = testing::RunCtl(args);
  EXPECT_EQ(o.exit.exit_code, 0) << verb << " --help: " << o.last_error;
  return o.out;
}

// The column of a table whose header names flags ("flag", "`train` flag").
int FlagColumn(const Section& s) {
  if (s.rows.empty()) return -1;
  for (size_t c = 0; c < s.rows[0].size(); ++c) {
    if (absl::StrContains(s.rows[0][c], "flag")) return static_cast<int>(c);
  }
  return -1;
}

// True when a table under a heading naming `verb` has `flag` in its flag
// column.
bool Documents(const std::vector<Section>& doc, const std::string& verb, const std::string& flag) {
  const std::string command = verb.empty() ? "`smallemctl`" : "`smallemctl " + verb + "`";
  for (const Section& s : doc) {
    if (!absl::StrContains(s.heading, command) &&
        !(verb == "train" && absl::StrContains(s.heading, "`train`"))) {
      continue;
    }
    const int column = FlagColumn(s);
    if (column < 0) continue;
    for (size_t r = 1; r < s.rows.size(); ++r) {
      if (static_cast<int>(s.rows[r].size()) > column && s.rows[r][column] == "`" + flag + "`") {
        return true;
      }
    }
  }
  return false;
}

const Section* RunSpecSection(const std::vector<Section>& doc) {
  for (const Section& s : doc) {
    if (absl::StrContains(s.heading, "Run-spec keys")) return &s;
  }
  return nullptr;
}

class ReferenceDocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    doc_ = ReadReference();
    ASSERT_FALSE(doc_.empty()) << "docs/reference.md is missing or has no heading";
  }
  std::vector<Section> doc_;
};

TEST_F(ReferenceDocTest, EveryFlagOfEveryVerbHasARow) {
  // Every verb the command lists, and the verbs those list (data prepare).
  std::vector<std::string> verbs = {""};
  for (size_t i = 0; i < verbs.size(); ++i) {
    const std::string help = Help(verbs[i]);
    for (const std::string& sub : VerbsOf(help)) {
      verbs.push_back(verbs[i].empty() ? sub : verbs[i] + " " + sub);
    }
    for (const std::string& flag : FlagsOf(help)) {
      EXPECT_TRUE(Documents(doc_, verbs[i], flag))
          << "`smallemctl " << verbs[i] << "` has " << flag << " but docs/reference.md has no "
          << "row for it under a heading naming `smallemctl " << verbs[i] << "`";
    }
  }
  EXPECT_GT(verbs.size(), 10u) << "the verbs were not read from `smallemctl --help`";
  // The flags a new user missed are there (and so in the table).
  const std::vector<std::string> train = FlagsOf(Help("train"));
  for (const char* flag : {"--bias", "--beta1", "--beta2", "--min-lr-ratio", "--eval-batch-size",
                           "--muon-lr"}) {
    EXPECT_NE(std::find(train.begin(), train.end(), flag), train.end()) << flag;
  }
}

TEST_F(ReferenceDocTest, EveryGridKeyHasARowAndEveryTwinExists) {
  const Section* spec = RunSpecSection(doc_);
  ASSERT_NE(spec, nullptr) << "docs/reference.md has no \"Run-spec keys\" section";
  const std::vector<std::string> spec_keys = grid_internal::SpecKeyNames();
  for (const std::string& key : spec_keys) {
    bool found = false;
    for (const auto& row : spec->rows) found |= !row.empty() && row[0] == "`" + key + "`";
    EXPECT_TRUE(found) << "grid key " << key << " has no row in the run-spec table";
  }
  for (const std::string& key : grid_internal::TopLevelKeyNames()) {
    bool found = false;
    for (const Section& s : doc_) {
      for (const auto& row : s.rows) {
        found |= !row.empty() && (absl::StartsWith(row[0], "`" + key + "`") ||
                                  absl::StartsWith(row[0], "`" + key + ":"));
      }
    }
    EXPECT_TRUE(found) << "top-level grid key " << key << " has no row";
  }
  // Each row's twins are real: its key a grid key, its flag a train flag.
  const std::vector<std::string> train = FlagsOf(Help("train"));
  const std::set<std::string> flags(train.begin(), train.end());
  const std::set<std::string> keys(spec_keys.begin(), spec_keys.end());
  const std::vector<std::string>& top = grid_internal::TopLevelKeyNames();
  for (size_t r = 1; r < spec->rows.size(); ++r) {
    const std::vector<std::string>& row = spec->rows[r];
    ASSERT_GE(row.size(), 2u);
    const std::string flag = absl::StrReplaceAll(row[1], {{"`", ""}});
    // "—": a run-spec key that `train` does not take (a worker's setting).
    if (flag != "—") {
      EXPECT_TRUE(flags.count(flag)) << row[0] << ": `smallemctl train` has no " << flag;
    }
    std::string key = row[0].substr(1, row[0].find_first_of("`:", 1) - 1);
    EXPECT_TRUE(keys.count(key) || std::find(top.begin(), top.end(), key) != top.end())
        << row[0] << ": the grid parser knows no key " << key << " (keys: "
        << absl::StrJoin(spec_keys, ", ") << ")";
  }
}

}  // namespace
}  // namespace smallem
