// A mixture of experts' routing balance through the real binaries:
// `smallemctl run` with its embedded coordinator and a real smallem-worker
// whose training child reports max/mean tokens per expert on its progress
// lines. The coordinator stores it with the run's progress (≥ 1 for the MoE
// run, 0 for the dense one), and `smallemctl status` / `watch` against the
// same database show it.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_store.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::TempDir;

TEST(RoutingE2eTest, MoeRunReportsItsExpertLoadAndDenseRunNone) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  TempDir dir;
  testing::CtlOutput out = testing::RunTinyGrid(
      dir, "route", "", 20, "dense",
      "  dense: {}\n  moe: {feed_forward: moe, experts: 4, top_k: 2}\n");
  const std::string db = dir.Join("smallem.db");
  ASSERT_EQ(out.exit.exit_code, 0) << out.out << "\n" << out.last_error;

  int64_t moe_run = 0;
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<RunRecord>> runs = (*store)->ListRuns(1);
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), 2u);
    for (const RunRecord& run : *runs) {
      ASSERT_EQ(run.status, RunStatus::kSucceeded) << run.variant << ": " << run.last_error;
      EXPECT_EQ(run.progress.step, 20) << run.variant;
      absl::StatusOr<std::vector<MetricPointRecord>> points =
          (*store)->ListMetricPoints(run.id, run.attempt, -1);
      ASSERT_TRUE(points.ok()) << points.status();
      ASSERT_EQ(points->size(), 2u) << run.variant << ": progress at steps 10 and 20";
      if (run.variant == "moe") {
        moe_run = run.id;
        EXPECT_GE(run.progress.max_over_mean_load, 1.0);
        // At most every token's k choices on one expert: E / 1.
        EXPECT_LE(run.progress.max_over_mean_load, 4.0);
        for (const MetricPointRecord& p : *points) EXPECT_GE(p.max_over_mean_load, 1.0);
      } else {
        EXPECT_EQ(run.progress.max_over_mean_load, 0.0);
        for (const MetricPointRecord& p : *points) EXPECT_EQ(p.max_over_mean_load, 0.0);
      }
    }
  }
  ASSERT_GT(moe_run, 0);

  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", db});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  testing::CtlOutput status = testing::RunCtl({"status", "route", "--coordinator",
                                               coordinator->address});
  ASSERT_EQ(status.exit.exit_code, 0) << status.last_error;
  EXPECT_TRUE(absl::StrContains(status.out, "load max/mean")) << status.out;
  for (absl::string_view line : absl::StrSplit(status.out, '\n')) {
    if (absl::StrContains(line, " moe ")) EXPECT_TRUE(absl::StrContains(line, "×")) << line;
    if (absl::StrContains(line, " dense ")) EXPECT_FALSE(absl::StrContains(line, "×")) << line;
  }
  testing::CtlOutput watched = testing::RunCtl(
      {"watch", absl::StrCat(moe_run), "--coordinator", coordinator->address});
  EXPECT_EQ(watched.exit.exit_code, 0) << watched.last_error;
  EXPECT_TRUE(absl::StrContains(watched.out, " · load ")) << watched.out;
}

}  // namespace
}  // namespace smallem
