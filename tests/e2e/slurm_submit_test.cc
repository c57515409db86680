// `smallemctl slurm submit --dry-run`: the sbatch script it prints, checked
// by bash, and its refusals of bad flags. (Submitting to a real Slurm is
// tests/cluster/slurm_test.sh.)
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/subprocess.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;

class SlurmSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }

  testing::CtlOutput DryRun(std::vector<std::string> flags) {
    std::vector<std::string> args = {"slurm", "submit", "--dry-run"};
    args.insert(args.end(), flags.begin(), flags.end());
    return RunCtl(args);
  }

  // bash -n: the script parses.
  void ExpectBashParses(const std::string& script) {
    const std::string path = dir_.Join("job.sbatch");
    testing::WriteFile(path, script + "\n");
    absl::StatusOr<ProgramResult> bash = RunProgram({"bash", "-n", path});
    ASSERT_TRUE(bash.ok()) << bash.status();
    EXPECT_EQ(bash->exit_code, 0) << bash->output;
  }

  testing::TempDir dir_;
};

TEST_F(SlurmSubmitTest, DryRunPrintsOneWorkerPerNodeThatDrainsOnSigterm) {
  testing::CtlOutput o = DryRun({"--coordinator", "login1:7070", "--nodes", "3", "--partition",
                                 "gpu", "--gpus-per-node", "4", "--time", "02:30", "--account",
                                 "proj1", "--worker-token-file", "/etc/smallem/worker.token",
                                 "--cache", "/scratch/it's here"});
  ASSERT_EQ(o.exit.exit_code, 0) << o.last_error;
  for (const char* line :
       {"#!/bin/bash", "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=4", "#SBATCH --partition=gpu", "#SBATCH --account=proj1",
        "#SBATCH --time=02:30:00", "#SBATCH --signal=TERM@120", "exec srun",
        "--coordinator login1:7070 --devices all",
        "--token-file /etc/smallem/worker.token", "--cache '/scratch/it'\\''s here'"}) {
    EXPECT_TRUE(absl::StrContains(o.out, line)) << "no \"" << line << "\" in:\n" << o.out;
  }
  ExpectBashParses(o.out);
}

TEST_F(SlurmSubmitTest, ATokenInTheEnvironmentStaysOutOfTheScript) {
  setenv("SMALLEM_WORKER_TOKEN", "s3cret-token-value", 1);
  testing::CtlOutput o = DryRun({"--coordinator", "10.0.0.5:7070"});
  unsetenv("SMALLEM_WORKER_TOKEN");
  ASSERT_EQ(o.exit.exit_code, 0) << o.last_error;
  EXPECT_FALSE(absl::StrContains(o.out, "s3cret")) << o.out;
  EXPECT_FALSE(absl::StrContains(o.out, "--token-file")) << o.out;
  EXPECT_TRUE(absl::StrContains(o.out, "$SMALLEM_WORKER_TOKEN in the job's")) << o.out;
  // Defaults: one node, no GPUs, partition or time asked for.
  EXPECT_TRUE(absl::StrContains(o.out, "#SBATCH --nodes=1\n")) << o.out;
  EXPECT_FALSE(absl::StrContains(o.out, "--gpus-per-node")) << o.out;
  EXPECT_FALSE(absl::StrContains(o.out, "--partition")) << o.out;
  EXPECT_FALSE(absl::StrContains(o.out, "--time")) << o.out;
  ExpectBashParses(o.out);
}

TEST_F(SlurmSubmitTest, BadFlagsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string named;
  };
  for (const Case& c : std::vector<Case>{
           {{"--coordinator", "login1"}, "--coordinator"},
           {{"--coordinator", "login1:99999"}, "--coordinator"},
           {{"--coordinator", "h:1", "--nodes", "0"}, "--nodes"},
           {{"--coordinator", "h:1", "--time", "2h"}, "--time"},
           {{"--coordinator", "h:1", "--time", "00:01"}, "--time"},
           {{"--coordinator", "h:1", "--partition", "gpu; rm -rf /"}, "--partition"},
           {{"--coordinator", "h:1", "--worker-token-file", "token"}, "--worker-token-file"},
       }) {
    testing::CtlOutput o = DryRun(c.flags);
    EXPECT_EQ(o.exit.exit_code, 2) << c.named;
    EXPECT_TRUE(absl::StrContains(o.last_error, c.named)) << o.last_error;
    EXPECT_TRUE(o.out.empty()) << o.out;
  }
}

}  // namespace
}  // namespace smallem
