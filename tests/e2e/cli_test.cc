// smallemctl as a user runs it: `run GRID` with its embedded coordinator and
// real worker children, and the errors a person sees.
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/data/dataset.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

using testing::RunCtl;
using Output = testing::CtlOutput;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }
  TempDir dir_;
};

TEST_F(CliTest, RunTrainsEveryCellPrintsTheReportAndResumes) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("cli", data, 2, 2, 20));
  const std::vector<std::string> args = {"run", grid, "--db", dir_.Join("smallem.db"),
                                         "--cache", dir_.Join("cache"), "--format", "csv"};
  Output first = RunCtl(args);
  ASSERT_EQ(first.exit.exit_code, 0) << first.out << "\n" << first.last_error;
  EXPECT_NE(first.out.find("4 runs (4 new"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("cli,v0,baseline"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("cli,v1,"), std::string::npos) << first.out;

  Output again = RunCtl(args);
  ASSERT_EQ(again.exit.exit_code, 0) << again.out << "\n" << again.last_error;
  EXPECT_NE(again.out.find("4 runs (0 new, 0 reissued, 4 already done"), std::string::npos)
      << again.out;
}

// The line of `out` that starts with `prefix`, or "".
std::string LineStartingWith(const std::string& out, const std::string& prefix) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line);
  }
  return "";
}

// `eval` takes the evaluation settings of the run that wrote the weights
// (its result.json), so it prints the loss `train` printed — here with a
// training batch and evaluation settings that all differ from the defaults.
TEST_F(CliTest, EvalReproducesTheLossTrainPrinted) {
  PrepareOptions options;
  options.files = testing::WriteTinyCorpus(dir_.Join("corpus"), /*documents=*/40);
  options.vocab = 300;
  options.out_dir = dir_.Join("data");
  options.val_fraction = 0.34;
  ASSERT_TRUE(PrepareDataset(options).ok());
  const std::string run = dir_.Join("run");
  Output train = RunCtl({"train", "--data", options.out_dir, "--layers", "1", "--heads", "2",
                         "--embed", "32", "--context", "32", "--batch", "4", "--steps", "10",
                         "--eval-batches", "1", "--eval-batch-size", "3", "--threads", "2",
                         "--out", run});
  ASSERT_EQ(train.exit.exit_code, 0) << train.out << "\n" << train.last_error;
  const std::string trained = LineStartingWith(train.out, "validation:");
  ASSERT_NE(trained, "") << train.out;
  EXPECT_NE(trained.find("(16 spans × 64 target tokens)"), std::string::npos) << trained;

  Output eval = RunCtl({"eval", "--weights", run + "/weights.safetensors", "--data",
                        options.out_dir, "--threads", "2"});
  ASSERT_EQ(eval.exit.exit_code, 0) << eval.out << "\n" << eval.last_error;
  EXPECT_EQ(LineStartingWith(eval.out, "validation:"), trained) << eval.out;
  EXPECT_NE(eval.out.find("on the same validation text"), std::string::npos) << eval.out;

  // The default settings would score other text: 200 batches, as many
  // spans as the split holds.
  Output other = RunCtl({"eval", "--weights", run + "/weights.safetensors", "--data",
                         options.out_dir, "--threads", "2", "--eval-batches", "200"});
  ASSERT_EQ(other.exit.exit_code, 0) << other.out << "\n" << other.last_error;
  EXPECT_NE(LineStartingWith(other.out, "validation:"), trained) << other.out;
  EXPECT_NE(other.out.find("on other validation text"), std::string::npos) << other.out;
}

TEST_F(CliTest, MalformedGridExitsWith2AndNamesFileLineAndKey) {
  const std::string grid = dir_.Join("bad.yaml");
  testing::WriteFile(grid,
                     "name: bad\ndata: d\nbudget: {steps: 10}\nseeds: [1]\nbaseline: a\n"
                     "variants:\n  a: {optimiser: adamw}\n");
  Output o = RunCtl({"run", grid, "--db", dir_.Join("smallem.db")});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("bad.yaml:7"), std::string::npos) << o.last_error;
  EXPECT_NE(o.last_error.find("optimizer"), std::string::npos) << o.last_error;
}

TEST_F(CliTest, UnreachableCoordinatorSaysHowToStartOne) {
  Output o = RunCtl({"status", "--coordinator", "127.0.0.1:1", "--timeout", "2"});
  EXPECT_EQ(o.exit.exit_code, 1);
  EXPECT_NE(o.last_error.find("smallem-coordinator"), std::string::npos) << o.last_error;
}

}  // namespace
}  // namespace smallem
