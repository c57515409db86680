// `smallemctl delete` and the list without cancelled experiments, against a
// coordinator process: what a user does with a grid submitted by mistake.
#include <string>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;
using testing::TempDir;
using Output = testing::CtlOutput;

TEST(DeleteCliTest, AGridSubmittedByMistakeIsCancelledHiddenThenDeleted) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  TempDir dir;
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", dir.Join("smallem.db")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string at = coordinator->address;
  const std::string data = dir.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir.path(), data).ok());
  const std::string grid = dir.Join("oops.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("oops", data, 2, 1, 20));
  ASSERT_EQ(RunCtl({"submit", grid, "--coordinator", at}).exit.exit_code, 0);
  ASSERT_EQ(RunCtl({"cancel", "oops", "--coordinator", at}).exit.exit_code, 0);

  // Cancelled with nothing in it: left out of the list, which says so.
  Output listed = RunCtl({"status", "--coordinator", at});
  ASSERT_EQ(listed.exit.exit_code, 0) << listed.last_error;
  EXPECT_EQ(listed.out.find("oops"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("1 experiment whose every run was cancelled not shown: "
                            "`smallemctl status --all`"),
            std::string::npos)
      << listed.out;
  Output all = RunCtl({"status", "--all", "--coordinator", at});
  ASSERT_EQ(all.exit.exit_code, 0) << all.last_error;
  EXPECT_NE(all.out.find("oops"), std::string::npos) << all.out;

  Output deleted = RunCtl({"delete", "oops", "--coordinator", at});
  ASSERT_EQ(deleted.exit.exit_code, 0) << deleted.last_error;
  EXPECT_NE(deleted.out.find("deleted experiment oops: 2 runs, 0 results, 0 metric points, "
                             "0 checkpoints"),
            std::string::npos)
      << deleted.out;
  Output after = RunCtl({"status", "--all", "--coordinator", at});
  EXPECT_NE(after.out.find("no experiments yet"), std::string::npos) << after.out;

  Output again = RunCtl({"delete", "oops", "--coordinator", at});
  EXPECT_EQ(again.exit.exit_code, 2);
  EXPECT_NE(again.last_error.find("oops"), std::string::npos) << again.last_error;
}

}  // namespace
}  // namespace smallem
