// smallemctl as a user runs it: `run GRID` with its embedded coordinator and
// real worker children, and the errors a person sees.
#include <fstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
