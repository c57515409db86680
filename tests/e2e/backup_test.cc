// `smallemctl admin backup FILE` against a running smallem-coordinator
// process: the copy, served by a second coordinator, gives the same report;
// an existing FILE is refused; the copy is owner-only (0600); a token-guarded
// coordinator refuses a backup without its client token.
#include <filesystem>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;
using testing::TempDir;

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    // A database with finished runs: `smallemctl run` on a tiny grid.
    const std::string data = dir_.Join("data");
    ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
    const std::string grid = dir_.Join("grid.yaml");
    testing::WriteFile(grid, testing::TinyGridYaml("bk", data, 2, 2, 20));
    testing::CtlOutput run = RunCtl({"run", grid, "--db", db(), "--cache", dir_.Join("cache"),
                                     "--threads", "1"});
    ASSERT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  }

  std::string db() const { return dir_.Join("smallem.db"); }

  TempDir dir_;
};

TEST_F(BackupTest, ACoordinatorOnTheCopyServesTheSameReport) {
  absl::StatusOr<testing::CoordinatorProcess> live =
      testing::StartCoordinatorProcess({"--db", db()});
  ASSERT_TRUE(live.ok()) << live.status();
  testing::CtlOutput before = RunCtl({"report", "bk", "--coordinator", live->address});
  ASSERT_EQ(before.exit.exit_code, 0) << before.last_error;
  ASSERT_TRUE(absl::StrContains(before.out, "v1")) << before.out;

  const std::string copy = dir_.Join("copy.db");
  testing::CtlOutput backup = RunCtl({"admin", "backup", copy, "--coordinator", live->address});
  ASSERT_EQ(backup.exit.exit_code, 0) << backup.out << "\n" << backup.last_error;
  EXPECT_TRUE(absl::StrContains(backup.out, "smallem-coordinator --db " + copy)) << backup.out;
  // Only its owner may read the copy of the database.
  EXPECT_EQ(std::filesystem::status(copy).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // Nothing but the copy is left beside it.
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), ".partial"))
        << entry.path();
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), ".backup-")) << entry.path();
  }

  // A second backup to the same file is refused; the copy is untouched.
  const auto size = std::filesystem::file_size(copy);
  testing::CtlOutput again = RunCtl({"admin", "backup", copy, "--coordinator", live->address});
  EXPECT_NE(again.exit.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(again.last_error, "exists")) << again.last_error;
  EXPECT_EQ(std::filesystem::file_size(copy), size);

  live->process->Kill();
  live->process->Wait();
  absl::StatusOr<testing::CoordinatorProcess> restored =
      testing::StartCoordinatorProcess({"--db", copy});
  ASSERT_TRUE(restored.ok()) << restored.status();
  testing::CtlOutput after = RunCtl({"report", "bk", "--coordinator", restored->address});
  ASSERT_EQ(after.exit.exit_code, 0) << after.last_error;
  EXPECT_EQ(after.out, before.out);
}

TEST_F(BackupTest, AGuardedCoordinatorWantsTheClientToken) {
  const std::string token_file = dir_.Join("client.token");
  testing::WriteFile(token_file, "client-token-0123456789abcdef\n");
  absl::StatusOr<testing::CoordinatorProcess> live = testing::StartCoordinatorProcess(
      {"--db", db(), "--client-token-file", token_file});
  ASSERT_TRUE(live.ok()) << live.status();
  const std::string copy = dir_.Join("copy.db");
  testing::CtlOutput refused = RunCtl({"admin", "backup", copy, "--coordinator", live->address});
  EXPECT_NE(refused.exit.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(copy));
  testing::CtlOutput allowed = RunCtl(
      {"admin", "backup", copy, "--coordinator", live->address, "--token-file", token_file});
  EXPECT_EQ(allowed.exit.exit_code, 0) << allowed.last_error;
  EXPECT_TRUE(std::filesystem::exists(copy));
}

}  // namespace
}  // namespace smallem
