// A small prepared dataset for engine tests: a few dozen documents of
// sentences drawn from a fixed vocabulary of words (learnable structure, no
// network), prepared with a 300-token BPE into a temporary directory.
#ifndef SMALLEM_TESTS_ENGINE_DATASET_FIXTURE_H_
#define SMALLEM_TESTS_ENGINE_DATASET_FIXTURE_H_

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "corpus/dataset.h"
#include "engine/random.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"

namespace smallem::testing {

// Returns the dataset directory (created once per process).
inline std::string TinyDataset() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path root = fs::temp_directory_path() /
                          ("smallem-test-data-" + std::to_string(::getpid()));
    fs::create_directories(root / "text");
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran",
                           "to", "house", "with", "red", "door", "big", "small", "tree"};
    Rng rng(42);
    std::vector<std::string> files;
    for (int d = 0; d < 40; ++d) {
      const fs::path file = root / "text" / ("doc" + std::to_string(d) + ".txt");
      std::ofstream out(file);
      for (int s = 0; s < 60; ++s) {
        const int n = 4 + static_cast<int>(rng.Below(6));
        for (int w = 0; w < n; ++w) out << (w ? " " : "") << words[rng.Below(17)];
        out << ".\n";
      }
      files.push_back(file.string());
    }
    PrepareOptions options{.files = files, .vocab = 300, .out_dir = (root / "data").string(),
                           .val_fraction = 0.2};
    absl::Status s = PrepareDataset(options);
    EXPECT_TRUE(s.ok()) << s;
    return (root / "data").string();
  }();
  return dir;
}

// A run spec on TinyDataset(): 2 layers, 2 heads, embed 32, context 32,
// batch 4, AdamW, seed 1, `steps` steps, `eval_batches` validation batches.
// Tests change what they study from there.
inline RunSpec TinyRunSpec(int64_t steps, int64_t eval_batches = 8) {
  RunSpec s;
  s.data = TinyDataset();
  s.layers = 2;
  s.heads = 2;
  s.embed = 32;
  s.context = 32;
  s.batch = 4;
  s.budget.steps = steps;
  s.eval_batches = eval_batches;
  s.seed = 1;
  return s;
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_ENGINE_DATASET_FIXTURE_H_
