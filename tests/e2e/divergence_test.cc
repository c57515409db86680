// Divergence through the real binaries: `smallemctl run` with its embedded
// coordinator and a real worker process whose training child meets an
// absurd learning rate. The run ends `diverged` at a step short of its
// budget, is never retried, and the report's row says so.
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

constexpr int kBudgetSteps = 200;

TEST(DivergenceE2eTest, AbsurdLearningRateEndsDivergedAndTheReportSaysSo) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  TempDir dir;
  testing::CtlOutput out =
      testing::RunTinyGrid(dir, "boom", ", warmup: 0", kBudgetSteps, "calm",
                           "  calm: {lr: 0.001}\n  wild: {lr: 1.0e+30}\n");
  const std::string db = dir.Join("smallem.db");
  ASSERT_EQ(out.exit.exit_code, 0) << out.out << "\n" << out.last_error;

  // The report: the wild arm is diverged, not pending, not a missing seed.
  std::string wild_row;
  for (absl::string_view line : absl::StrSplit(out.out, '\n')) {
    if (absl::StartsWith(line, "boom,wild,")) wild_row = std::string(line);
  }
  EXPECT_TRUE(absl::StartsWith(wild_row, "boom,wild,diverged,")) << out.out;

  // The store: diverged at a progress step short of the budget, one attempt.
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(db);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::vector<RunRecord>> runs = (*store)->ListRuns(1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  int diverged = 0;
  for (const RunRecord& run : *runs) {
    if (run.variant != "wild") {
      EXPECT_EQ(run.status, RunStatus::kSucceeded) << run.variant;
      continue;
    }
    ++diverged;
    EXPECT_EQ(run.status, RunStatus::kDiverged);
    EXPECT_GT(run.diverged_step, 0);
    EXPECT_LT(run.diverged_step, kBudgetSteps);
    EXPECT_EQ(run.attempt, 1) << "a diverged run is never retried";
    EXPECT_EQ(run.engine_failures, 0);
    EXPECT_EQ(run.last_failure, FailureClass::kDiverged);
    EXPECT_TRUE(absl::StrContains(run.last_error, "diverged")) << run.last_error;
    EXPECT_FALSE((*store)->GetResult(run.id)->has_value()) << "no result for a diverged run";
  }
  EXPECT_EQ(diverged, 1);
  absl::StatusOr<RunCountsRecord> counts = (*store)->CountRuns(1);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->diverged, 1);
  EXPECT_EQ(counts->succeeded, 1);
}

}  // namespace
}  // namespace smallem
