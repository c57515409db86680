// One coordinator per database file, as one per port: a second owner — a
// coordinator or `smallemctl run`, in another process — is refused with
// the file named; `--db` readers are let in beside the owner.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;
using testing::TempDir;
using Output = testing::CtlOutput;

class StoreOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }
  std::string db() const { return dir_.Join("svc.db"); }

  TempDir dir_;
};

TEST_F(StoreOwnerTest, ASecondOwnerOfTheDatabaseIsRefusedAndReadersAreNot) {
  absl::StatusOr<testing::CoordinatorProcess> owner =
      testing::StartCoordinatorProcess({"--db", db()});
  ASSERT_TRUE(owner.ok()) << owner.status();
  const std::string in_use = "the database " + db() + " is in use";
  const std::string holder = absl::StrCat("(pid ", owner->process->pid(), ")");

  // `smallemctl run` on the served file: refused before it submits.
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("owned", data, 1, 1, 20));
  Output run = RunCtl({"run", grid, "--db", db(), "--cache", dir_.Join("cache")});
  EXPECT_EQ(run.exit.exit_code, 1) << run.out;
  EXPECT_NE(run.last_error.find(in_use), std::string::npos) << run.last_error;
  EXPECT_NE(run.last_error.find(holder), std::string::npos) << run.last_error;

  // A second coordinator, on another port: refused the same way.
  absl::StatusOr<testing::CoordinatorProcess> second =
      testing::StartCoordinatorProcess({"--db", db()});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(in_use), std::string::npos) << second.status();

  // The owner serves on, and a reader reads the file beside it.
  Output listed = RunCtl({"status", "--coordinator", owner->address});
  EXPECT_EQ(listed.exit.exit_code, 0) << listed.last_error;
  Output read = RunCtl({"status", "--db", db()});
  EXPECT_EQ(read.exit.exit_code, 0) << read.last_error;
  EXPECT_NE(read.out.find("no experiments yet"), std::string::npos) << read.out;

  // However the owner ends, its lock goes with it.
  owner->process->Kill();
  owner->process->Wait();
  absl::StatusOr<testing::CoordinatorProcess> next =
      testing::StartCoordinatorProcess({"--db", db()});
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
}  // namespace smallem
