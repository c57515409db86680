// Helpers for worker and end-to-end tests: a tiny real dataset prepared with
// the engine (a few KB of text, vocabulary 300), the tiny model the tests
// train (1 layer, embed 32, context 32), and the built binaries.
#ifndef SMALLEM_TESTS_WORKER_WORKER_TEST_SUPPORT_H_
#define SMALLEM_TESTS_WORKER_WORKER_TEST_SUPPORT_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "corpus/dataset.h"
#include "tests/server/service_test_support.h"

namespace smallem::testing {

// A few KB of varied English-like text in `documents` files.
inline std::vector<std::string> WriteTinyCorpus(const std::string& dir, int documents = 6) {
  static const char* kWords[] = {"the", "model", "learns", "a", "small", "language", "of",
                                 "words", "and", "numbers", "while", "noise", "hides",
                                 "signal", "in", "every", "seed", "step", "loss", "falls"};
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  uint32_t state = 12345;
  for (int d = 0; d < documents; ++d) {
    std::string text;
    while (text.size() < 1200) {
      for (int w = 0; w < 8; ++w) {
        state = state * 1103515245u + 12345u;
        absl::StrAppend(&text, kWords[(state >> 16) % 20], w == 7 ? ".\n" : " ");
      }
    }
    const std::string path = absl::StrCat(dir, "/doc", d, ".txt");
    WriteFile(path, text);
    files.push_back(path);
  }
  return files;
}

// Prepares a real dataset (vocab 300) from a tiny corpus into `out`.
inline absl::Status PrepareTinyDataset(const std::string& scratch, const std::string& out) {
  PrepareOptions options;
  options.files = WriteTinyCorpus(scratch + "/corpus");
  options.vocab = 300;
  options.out_dir = out;
  options.val_fraction = 0.34;
  return PrepareDataset(options);
}

// The tiny run spec the tests train: 1 layer, embed 32, context 32.
inline std::string TinySpecJson(const std::string& data, int steps = 20) {
  return absl::StrCat(R"({"data":")", data,
                      R"(","arch":"gpt2","layers":1,"heads":2,"embed":32,"context":32,)"
                      R"("batch":4,"eval_batches":4,"steps":)",
                      steps, R"(,"seed":1})");
}

// A grid over the tiny model: `variants` learning rates × `seeds` seeds.
inline std::string TinyGridYaml(const std::string& name, const std::string& data, int variants,
                                int seeds, int steps = 20) {
  return MakeGridYaml(name, data, variants, seeds, steps);
}

// The build directory (ctest sets SMALLEM_BUILD_DIR); "" when unknown.
inline std::string BuildDir() {
  const char* dir = std::getenv("SMALLEM_BUILD_DIR");
  return dir != nullptr ? dir : "";
}

inline std::string WorkerBinary() { return BuildDir() + "/worker/smallem-worker"; }
inline std::string CoordinatorBinary() { return BuildDir() + "/server/smallem-coordinator"; }
inline std::string CtlBinary() { return BuildDir() + "/cli/smallemctl"; }

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_WORKER_WORKER_TEST_SUPPORT_H_
