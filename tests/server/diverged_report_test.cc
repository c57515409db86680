// Diverged runs in a comparison: an outcome shown as such, never a missing
// seed and never part of a mean (server/analysis/equal_steps.h).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/analysis/equal_steps.h"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;
using testing::Steps;

ComparedRun Finished(const std::string& variant, int64_t seed, double loss) {
  return MakeRun(variant, seed, 300, RunState::kSucceeded, loss, 10, "cpu", 1000);
}

ComparedRun Diverged(const std::string& variant, int64_t seed, int64_t step) {
  ComparedRun r = MakeRun(variant, seed, 300, RunState::kDiverged);
  r.diverged_step = step;
  return r;
}

ComparisonPlan Plan() {
  ComparisonPlan plan;
  plan.experiment = "demo";
  plan.baseline = "baseline";
  plan.variants = {"baseline", "wild", "calm"};
  plan.seeds = {1, 2};
  plan.budget = Steps(300);
  return plan;
}

TEST(DivergedReportTest, DivergedArmIsShownAsDivergedWithNoMeanAndTheRestCompared) {
  const std::vector<ComparedRun> runs = {
      Finished("baseline", 1, 2.00), Finished("baseline", 2, 2.02),
      Finished("wild", 1, 1.50),     Diverged("wild", 2, 40),
      Finished("calm", 1, 2.01),     Finished("calm", 2, 2.03)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan(), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows.size(), 3u);
  const ReportRow& wild = report->rows[1];
  EXPECT_EQ(wild.variant, "wild");
  EXPECT_EQ(wild.verdict, Verdict::kDiverged);
  EXPECT_FALSE(wild.mean_loss.has_value()) << "a diverged arm is never averaged";
  EXPECT_FALSE(wild.delta.has_value());
  EXPECT_EQ(wild.VerdictText(), "diverged: 1 of 2 seeds diverged (seed 2 at step 40)");
  // Not pending: the report is complete, and the other arm is compared.
  EXPECT_TRUE(report->Complete());
  EXPECT_EQ(report->rows[2].verdict, Verdict::kUndecided);
  EXPECT_TRUE(report->rows[2].mean_loss.has_value());
}

TEST(DivergedReportTest, DivergedBaselineRefusesTheOtherArms) {
  const std::vector<ComparedRun> runs = {
      Finished("baseline", 1, 2.00), Diverged("baseline", 2, 10),
      Finished("wild", 1, 1.50),     Finished("wild", 2, 1.52),
      Finished("calm", 1, 2.01),     Finished("calm", 2, 2.03)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan(), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows[0].verdict, Verdict::kDiverged);
  EXPECT_EQ(report->rows[1].verdict, Verdict::kRefused);
  EXPECT_THAT(report->rows[1].VerdictText(), HasSubstr("the baseline diverged"));
  EXPECT_TRUE(report->Complete());
}

}  // namespace
}  // namespace smallem
