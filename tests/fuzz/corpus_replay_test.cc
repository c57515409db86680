// Every fuzz target (fuzz/fuzz_targets.h) over its corpus in the tree
// (fuzz/corpus/<name>/: seeds and every input that once crashed it), then a
// bounded run of deterministic mutations of that corpus: byte flips,
// insertions, deletions, duplicated ranges and splices of two inputs. Any
// compiler, no libFuzzer: a crash or a failed CHECK fails the test binary;
// scripts/fuzz runs the real fuzzer (docs/fuzzing.md).
#include <algorithm>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "base/files.h"
#include "fuzz/fuzz_targets.h"
#include "gtest/gtest.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

// Mutations per corpus input in the bounded run.
constexpr int kMutationsPerInput = 200;

std::vector<std::string> ReadCorpus(const std::string& name) {
  std::vector<std::string> inputs;
  const fs::path dir = fs::path(SMALLEM_SOURCE_DIR) / "fuzz" / "corpus" / name;
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) {
    absl::StatusOr<std::string> bytes = ReadFile(path.string());
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (bytes.ok()) inputs.push_back(*std::move(bytes));
  }
  return inputs;
}

std::string Mutate(const std::string& input, const std::vector<std::string>& corpus,
                   std::mt19937& rng) {
  std::string out = input;
  auto pick = [&](size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    switch (pick(6)) {
      case 0:  // flip a bit
        if (!out.empty()) out[pick(out.size())] ^= static_cast<char>(1 << pick(8));
        break;
      case 1:  // insert a byte, often a JSON/YAML special character
        out.insert(out.begin() + static_cast<long>(pick(out.size() + 1)),
                   "{}[]:,\"-0123456789e.\n #\\"[pick(24)]);
        break;
      case 2:  // delete a range
        if (!out.empty()) {
          const size_t at = pick(out.size());
          out.erase(at, 1 + pick(std::min<size_t>(16, out.size() - at)));
        }
        break;
      case 3:  // duplicate a range
        if (!out.empty()) {
          const size_t at = pick(out.size());
          out.insert(pick(out.size()), out.substr(at, 1 + pick(32)));
        }
        break;
      case 4: {  // splice with another input
        const std::string& other = corpus[pick(corpus.size())];
        out = out.substr(0, pick(out.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      case 5:  // an extreme number
        out.insert(pick(out.size() + 1),
                   std::vector<std::string>{"-1", "1e308", "18446744073709551616", "-0",
                                            "9223372036854775807", "NaN"}[pick(6)]);
        break;
    }
  }
  return out;
}

}  // namespace

namespace fuzz {
// For gtest's messages: the target's name, not its bytes.
void PrintTo(const Target& target, std::ostream* out) { *out << target.name; }
}  // namespace fuzz

namespace {

class CorpusReplayTest : public ::testing::TestWithParam<fuzz::Target> {};

TEST_P(CorpusReplayTest, CorpusAndItsMutationsRunClean) {
  const fuzz::Target& target = GetParam();
  const std::vector<std::string> corpus = ReadCorpus(target.name);
  ASSERT_FALSE(corpus.empty()) << "fuzz/corpus/" << target.name << "/ holds no seed";
  for (const std::string& input : corpus) {
    EXPECT_EQ(target.entry(reinterpret_cast<const uint8_t*>(input.data()), input.size()), 0);
  }
  std::mt19937 rng(1);
  for (const std::string& input : corpus) {
    for (int i = 0; i < kMutationsPerInput; ++i) {
      const std::string mutated = Mutate(input, corpus, rng);
      target.entry(reinterpret_cast<const uint8_t*>(mutated.data()), mutated.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, CorpusReplayTest, ::testing::ValuesIn(fuzz::kTargets),
                         [](const ::testing::TestParamInfo<fuzz::Target>& info) {
                           std::string name = info.param.name;
                           name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
                           return name;
                         });

}  // namespace
}  // namespace smallem
