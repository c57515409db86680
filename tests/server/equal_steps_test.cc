#include "server/analysis/equal_steps.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;
using testing::Steps;

constexpr int64_t kBaseParams = 1'000'000;


ComparedRun Finished(const std::string& variant, int64_t seed, double loss,
                     int64_t params = kBaseParams, const std::string& device_class = "cpu") {
  return MakeRun(variant, seed, 300, RunState::kSucceeded, loss, 10 * static_cast<double>(seed),
                 device_class, params);
}

ComparedRun Unfinished(const std::string& variant, int64_t seed, RunState state) {
  return MakeRun(variant, seed, 300, state);
}

ComparisonPlan Plan(std::vector<std::string> variants, std::vector<int64_t> seeds = {1, 2}) {
  ComparisonPlan plan;
  plan.experiment = "demo";
  plan.baseline = "baseline";
  plan.variants = std::move(variants);
  plan.seeds = std::move(seeds);
  plan.budget = Steps(300);
  return plan;
}

const ReportRow& Row(const Report& report, const std::string& variant) {
  for (const ReportRow& row : report.rows) {
    if (row.variant == variant) return row;
  }
  ADD_FAILURE() << "no row " << variant;
  static const ReportRow none;
  return none;
}

// The hand-computed fixture. Baseline seeds 1.500 / 1.501: mean 1.5005.
// Every arm but `worse` has s² = 5e-7 (df 1), `worse` 0: pooled over the six
// arms σ² = 5·5e-7/6 = 4.1667e-7, σ = 0.00064550, df 6. Two seeds per arm:
// SE = σ·√(1/2 + 1/2) = σ, t₀.₉₇₅(6) = 2.4469119, t·SE = 0.0015795 < floor,
// so every τ = 0.002; 95 % CI = Δ ± 0.0015795.
//   better: 1.490 / 1.491, mean 1.4905, Δ = −0.0100 = 5.00τ
//   noise:  1.501 / 1.502, mean 1.5015, Δ = +0.0010 = 0.50τ; 90 % interval
//           Δ ± t₀.₉₅(6)·σ = ±1.9431803·σ = [−0.0002543, +0.0022543], not
//           inside ±0.002: undecided, effects up to 0.001 + 0.0015795 =
//           0.0025795 not ruled out; seeds to decide: the smallest n with
//           0.001 + (t₀.₉₅(2n−2) + 0.8416)·σ·√(2/n) < 0.002 is 6 (n = 5:
//           0.0010 + 2.7011·0.00064550·0.63246 = 0.0021027)
//   worse:  1.5065 ×2,     mean 1.5065, Δ = +0.0060 = 3.00τ
//   wide:   as noise, params +2.0001 % (warning); exact: params +2.0000 % (none)
std::vector<ComparedRun> Fixture() {
  return {Finished("baseline", 1, 1.500), Finished("baseline", 2, 1.501),
          Finished("better", 1, 1.490),   Finished("better", 2, 1.491),
          Finished("noise", 1, 1.501),    Finished("noise", 2, 1.502),
          Finished("worse", 1, 1.5065),   Finished("worse", 2, 1.5065),
          Finished("wide", 1, 1.501, 1'020'001), Finished("wide", 2, 1.502, 1'020'001),
          Finished("exact", 1, 1.501, 1'020'000), Finished("exact", 2, 1.502, 1'020'000)};
}

TEST(ComparatorTest, HandComputedFixture) {
  absl::StatusOr<Report> report = CompareAtEqualSteps(
      Plan({"baseline", "better", "noise", "worse", "wide", "exact"}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "cpu");
  ASSERT_TRUE(report->noise.sigma.has_value());
  EXPECT_NEAR(*report->noise.sigma, std::sqrt(2.5e-6 / 6), 1e-12);
  EXPECT_EQ(report->noise.df, 6);

  const ReportRow& base = Row(*report, "baseline");
  EXPECT_EQ(base.verdict, Verdict::kBaseline);
  EXPECT_NEAR(*base.mean_loss, 1.5005, 1e-12);
  EXPECT_FALSE(base.delta.has_value());

  const ReportRow& better = Row(*report, "better");
  EXPECT_EQ(better.verdict, Verdict::kBetter);
  EXPECT_NEAR(*better.delta, -0.0100, 1e-12);
  EXPECT_NEAR(*better.delta_over_tau, -5.0, 1e-9);  // Δ/τ keeps Δ's sign
  EXPECT_EQ(better.se_method, SeMethod::kPooled);
  EXPECT_NEAR(*better.se, std::sqrt(2.5e-6 / 6), 1e-12);
  EXPECT_DOUBLE_EQ(*better.df, 6);
  EXPECT_NEAR(*better.ci_low, -0.0115795, 1e-6);
  EXPECT_NEAR(*better.ci_high, -0.0084205, 1e-6);
  EXPECT_DOUBLE_EQ(*better.tau, 0.002);
  EXPECT_EQ(better.VerdictText(), "better (5.00τ)");

  const ReportRow& noise = Row(*report, "noise");
  EXPECT_EQ(noise.verdict, Verdict::kUndecided);
  EXPECT_NEAR(*noise.delta, 0.0010, 1e-12);
  EXPECT_NEAR(*noise.tost_high, 0.001 + 1.9431803 * std::sqrt(2.5e-6 / 6), 1e-7);
  EXPECT_NEAR(*noise.missable_effect, 0.0025795, 1e-7);
  EXPECT_EQ(noise.seeds_to_decide, 6);
  EXPECT_EQ(noise.VerdictText(),
            "undecided: effects up to 0.0026 not ruled out; ~6 seeds per arm would decide");

  const ReportRow& worse = Row(*report, "worse");
  EXPECT_EQ(worse.verdict, Verdict::kWorse);
  EXPECT_NEAR(*worse.delta, 0.0060, 1e-12);
  EXPECT_EQ(worse.VerdictText(), "worse (3.00τ)");
  EXPECT_TRUE(report->Complete());
}

TEST(ComparatorTest, BaselineRowComesFirstThenPlanOrder) {
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"better", "baseline", "noise"}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows.size(), 3u);
  EXPECT_EQ(report->rows[0].variant, "baseline");
  EXPECT_EQ(report->rows[1].variant, "better");
  EXPECT_EQ(report->rows[2].variant, "noise");
}

TEST(ComparatorTest, ParameterCountsMoreThanTwoPercentApartWarn) {
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"baseline", "wide", "exact"}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  const ReportRow& wide = Row(*report, "wide");
  EXPECT_EQ(*wide.params, 1'020'001);
  EXPECT_NEAR(*wide.params_change, 0.020001, 1e-12);
  EXPECT_TRUE(wide.params_warning);
  const ReportRow& exact = Row(*report, "exact");
  EXPECT_NEAR(*exact.params_change, 0.02, 1e-12);
  EXPECT_FALSE(exact.params_warning);
  EXPECT_EQ(*Row(*report, "baseline").params, kBaseParams);
  // The size warning, then the family of the two compared variants.
  ASSERT_EQ(report->notes.size(), 2u);
  EXPECT_THAT(report->notes[1], HasSubstr("2 variants compared at α = 0.05 each"));
  EXPECT_THAT(report->notes[0], HasSubstr("wide"));
  EXPECT_THAT(report->notes[0], HasSubstr("+2.0 %"));
  EXPECT_THAT(report->notes[0], HasSubstr("not at equal size"));
}

TEST(ComparatorTest, NoiseAboveTheFloorSetsTau) {
  // Baseline 1.500 / 1.504 (s² = 8e-6), close 1.4995 / 1.5005 (5e-7), far
  // 0: σ² = 8.5e-6/3, df 3; SE = σ; τ = t₀.₉₇₅(3)·σ = 3.1824463·0.0016833
  // = 0.0053570.
  std::vector<ComparedRun> runs = {Finished("baseline", 1, 1.500), Finished("baseline", 2, 1.504),
                                   Finished("close", 1, 1.4995),   Finished("close", 2, 1.5005),
                                   Finished("far", 1, 1.496),      Finished("far", 2, 1.496)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "close", "far"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(*Row(*report, "far").tau, 3.1824463 * std::sqrt(8.5e-6 / 3), 1e-7);
  // Δ = −0.002: within this noise.
  EXPECT_EQ(Row(*report, "close").verdict, Verdict::kUndecided);
  // Δ = −0.006 = 1.12τ.
  EXPECT_EQ(Row(*report, "far").VerdictText(), "better (1.12τ)");
}

TEST(ComparatorTest, ConfigurableFloor) {
  ComparisonPlan plan = Plan({"baseline", "better"});
  plan.noise_floor = 0.0005;
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  // Two arms of s² = 5e-7: σ = 0.00070711, df 2, τ = 4.3026527·σ = 0.0030425
  // above this floor; Δ = −0.010 = 3.29τ.
  EXPECT_NEAR(*Row(*report, "better").tau, 4.3026527 * std::sqrt(5e-7), 1e-8);
  EXPECT_EQ(Row(*report, "better").VerdictText(), "better (3.29τ)");
}

TEST(ComparatorTest, VariantWithAMissingSeedIsPending) {
  std::vector<ComparedRun> runs = Fixture();
  runs.erase(runs.begin() + 3);  // better, seed 2
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  const ReportRow& better = Row(*report, "better");
  EXPECT_EQ(better.verdict, Verdict::kPending);
  EXPECT_EQ(better.seeds_finished, 1);
  EXPECT_EQ(better.seeds_expected, 2);
  EXPECT_FALSE(better.mean_loss.has_value());
  EXPECT_FALSE(better.delta.has_value());
  EXPECT_EQ(better.VerdictText(), "pending: 1 of 2 seeds finished");
  EXPECT_FALSE(report->Complete());
}

TEST(ComparatorTest, RunningAndFailedRunsLeaveTheVariantPending) {
  std::vector<ComparedRun> runs = {Finished("baseline", 1, 1.500), Finished("baseline", 2, 1.501),
                                   Unfinished("better", 1, RunState::kPending),
                                   Unfinished("better", 2, RunState::kFailed)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Row(*report, "better").VerdictText(), "pending: 0 of 2 seeds finished, 1 failed");
}

TEST(ComparatorTest, APendingRowNamesRunningFailedAndCancelledSeedsApart) {
  std::vector<ComparedRun> runs = {Finished("baseline", 1, 1.500), Finished("baseline", 2, 1.501),
                                   Finished("baseline", 3, 1.502),
                                   Unfinished("better", 1, RunState::kRunning),
                                   Unfinished("better", 2, RunState::kFailed),
                                   Unfinished("better", 3, RunState::kCancelled)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}, {1, 2, 3}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Row(*report, "better").VerdictText(),
            "pending: 0 of 3 seeds finished, 1 running, 1 failed, 1 cancelled");
}

TEST(ComparatorTest, VariantWithNoRunsAtAllIsPending) {
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"baseline", "better", "never"}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Row(*report, "never").verdict, Verdict::kPending);
  EXPECT_EQ(Row(*report, "better").verdict, Verdict::kBetter);
}

TEST(ComparatorTest, NothingIsComparedUntilTheBaselineIsComplete) {
  std::vector<ComparedRun> runs = Fixture();
  runs.erase(runs.begin() + 1);  // baseline, seed 2
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Row(*report, "baseline").verdict, Verdict::kPending);
  EXPECT_FALSE(Row(*report, "better").tau.has_value());
  const ReportRow& better = Row(*report, "better");
  EXPECT_EQ(better.verdict, Verdict::kPending);
  EXPECT_EQ(better.pending_reason, "waiting for the baseline");
  EXPECT_NEAR(*better.mean_loss, 1.4905, 1e-12);
}

TEST(ComparatorTest, OnlyTheBaselinesDeviceClassIsComparedAndTheRestIsNamed) {
  std::vector<ComparedRun> runs = Fixture();
  runs.push_back(Finished("better", 1, 1.2, kBaseParams, "nvidia-h200"));
  runs.push_back(Finished("gpu_only", 1, 1.3, kBaseParams, "nvidia-h200"));
  runs.push_back(Finished("gpu_only", 2, 1.3, kBaseParams, "nvidia-h200"));
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"baseline", "better", "gpu_only"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "cpu");
  // The h200 result does not leak into better's mean.
  EXPECT_NEAR(*Row(*report, "better").mean_loss, 1.4905, 1e-12);
  const ReportRow& gpu_only = Row(*report, "gpu_only");
  EXPECT_EQ(gpu_only.verdict, Verdict::kPending);
  EXPECT_EQ(gpu_only.pending_reason, "0 of 2 seeds finished, 2 on another device class");
  ASSERT_EQ(report->left_out.size(), 3u);
  EXPECT_EQ(report->left_out[0].device_class, "nvidia-h200");
  ASSERT_FALSE(report->notes.empty());
  EXPECT_THAT(report->notes.back(), HasSubstr("3 finished run(s) on device class nvidia-h200 "
                                              "left out"));
  EXPECT_THAT(report->notes.back(), HasSubstr("only runs on cpu"));
}

TEST(ComparatorTest, DeviceClassWithMostBaselineRunsWins) {
  std::vector<ComparedRun> runs = {
      Finished("baseline", 1, 1.500, kBaseParams, "h200"),
      Finished("baseline", 2, 1.501, kBaseParams, "h200"),
      Finished("baseline", 1, 1.600, kBaseParams, "cpu"),
  };
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "h200");
  EXPECT_NEAR(*Row(*report, "baseline").mean_loss, 1.5005, 1e-12);
}

TEST(ComparatorTest, PlanCanNameTheDeviceClass) {
  std::vector<ComparedRun> runs = Fixture();
  runs.push_back(Finished("baseline", 1, 1.2, kBaseParams, "h200"));
  ComparisonPlan plan = Plan({"baseline", "better"});
  plan.device_class = "h200";
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "h200");
  EXPECT_EQ(Row(*report, "baseline").seeds_finished, 1);
  EXPECT_EQ(Row(*report, "better").verdict, Verdict::kPending);
}

TEST(ComparatorTest, BeforeTheBaselineHasResultsTheBusiestClassIsUsed) {
  std::vector<ComparedRun> runs = {Finished("better", 1, 1.49), Finished("better", 2, 1.49)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "cpu");
  EXPECT_TRUE(report->left_out.empty());
  EXPECT_EQ(Row(*report, "better").pending_reason, "waiting for the baseline");
}

TEST(ComparatorTest, RunsOfOtherBudgetsVariantsAndSeedsAreIgnored) {
  std::vector<ComparedRun> runs = Fixture();
  ComparedRun reference = Finished("reference", 1, 1.3);
  reference.budget = Steps(600);
  runs.push_back(reference);
  ComparedRun longer = Finished("better", 1, 1.0);
  longer.budget = Steps(600);
  runs.push_back(longer);
  runs.push_back(Finished("better", 7, 1.0));  // seed not in the plan
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows.size(), 2u);
  EXPECT_NEAR(*Row(*report, "better").mean_loss, 1.4905, 1e-12);
  EXPECT_TRUE(report->left_out.empty());
}

TEST(ComparatorTest, SingleSeedDecidesNothingAndSaysSo) {
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"baseline", "better"}, {1}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->noise.sigma.has_value());
  EXPECT_DOUBLE_EQ(*Row(*report, "better").tau, 0.002);
  EXPECT_FALSE(Row(*report, "better").ci_low.has_value());
  ASSERT_FALSE(report->notes.empty());
  EXPECT_THAT(report->notes[0], HasSubstr("noise was not measured"));
  // Δ = −0.010 is five floors, but one seed says nothing of the noise.
  EXPECT_EQ(Row(*report, "better").verdict, Verdict::kUndecided);
  EXPECT_EQ(Row(*report, "better").VerdictText(), "undecided: noise not measured");
  EXPECT_THAT(report->notes[0], HasSubstr("two seeds per arm measure it"));
}

TEST(ComparatorTest, WelchTWithThreeSeedsPerArm) {
  std::vector<ComparedRun> runs = {
      Finished("baseline", 1, 1.500), Finished("baseline", 2, 1.501),
      Finished("baseline", 3, 1.502), Finished("better", 1, 1.490),
      Finished("better", 2, 1.491),   Finished("better", 3, 1.492)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}, {1, 2, 3}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  // Both variances 1e-6: t = −0.010 / sqrt(2e-6 / 3).
  ASSERT_TRUE(Row(*report, "better").welch_t.has_value());
  EXPECT_NEAR(*Row(*report, "better").welch_t, -0.010 / std::sqrt(2e-6 / 3), 1e-6);
  // And Welch's SE decides: ν = 4, τ = 2.7764451·√(2e-6/3) = 0.0022669, 4.41τ.
  const ReportRow& better = Row(*report, "better");
  EXPECT_EQ(better.se_method, SeMethod::kWelch);
  EXPECT_NEAR(*better.df, 4, 1e-9);
  EXPECT_NEAR(*better.tau, 2.7764451 * std::sqrt(2e-6 / 3), 1e-8);
  EXPECT_EQ(better.VerdictText(), "better (4.41τ)");
}

TEST(ComparatorTest, DifferentValidationTextsAreRefused) {
  std::vector<ComparedRun> runs = Fixture();
  for (ComparedRun& r : runs) r.eval_fingerprint = "sha256:aaaa/1024";
  for (ComparedRun& r : runs) {
    if (r.variant == "worse") r.eval_fingerprint = "sha256:bbbb/1024";
  }
  // An older result without one compares as before.
  for (ComparedRun& r : runs) {
    if (r.variant == "noise") r.eval_fingerprint.clear();
  }
  absl::StatusOr<Report> report =
      CompareAtEqualSteps(Plan({"baseline", "better", "noise", "worse"}), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  const ReportRow& worse = Row(*report, "worse");
  EXPECT_EQ(worse.verdict, Verdict::kRefused);
  EXPECT_FALSE(worse.delta.has_value());
  EXPECT_THAT(worse.VerdictText(), HasSubstr("not compared: scored on another validation text"));
  EXPECT_THAT(worse.VerdictText(), HasSubstr("sha256:bbbb/1024 vs sha256:aaaa/1024"));
  EXPECT_EQ(Row(*report, "better").verdict, Verdict::kBetter);
  EXPECT_EQ(Row(*report, "noise").verdict, Verdict::kUndecided);
  bool noted = false;
  for (const std::string& note : report->notes) noted |= note.find("worse is not compared") == 0;
  EXPECT_TRUE(noted);
}

TEST(ComparatorTest, TauMultiplesKeepTwoDecimalsBelowTen) {
  EXPECT_EQ(FormatTauMultiple(1.04), "1.04τ");
  EXPECT_EQ(FormatTauMultiple(9.994), "9.99τ");
  EXPECT_EQ(FormatTauMultiple(9.996), "10.0τ");
  EXPECT_EQ(FormatTauMultiple(24.5), "24.5τ");
  EXPECT_EQ(FormatTauMultiple(184.2), "184τ");
}

TEST(ComparatorTest, NoWelchTWithTwoSeeds) {
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(Row(*report, "better").welch_t.has_value());
}

TEST(ComparatorTest, TwoResultsForOneCellAreRejected) {
  std::vector<ComparedRun> runs = Fixture();
  runs.push_back(Finished("better", 1, 1.2));
  absl::StatusOr<Report> report = CompareAtEqualSteps(Plan({"baseline", "better"}), runs);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("two finished runs for variant \"better\" "
                                                   "seed 1"));
}

TEST(ComparatorTest, InconsistentPlansAreRejected) {
  ComparisonPlan no_baseline = Plan({"better"});
  EXPECT_THAT(CompareAtEqualSteps(no_baseline, {}).status().message(),
              HasSubstr("baseline \"baseline\" is not among the variants"));
  EXPECT_THAT(CompareAtEqualSteps(Plan({"baseline"}, {}), {}).status().message(),
              HasSubstr("no seeds"));
  ComparisonPlan floor = Plan({"baseline"});
  floor.noise_floor = 0;
  EXPECT_THAT(CompareAtEqualSteps(floor, {}).status().message(),
              HasSubstr("noise floor must be positive"));
}

TEST(ComparatorTest, PlanForAGridComparesItsVariantsSeedsAndBudget) {
  absl::StatusOr<Grid> grid = ParseGrid(R"(name: demo
data: data/demo
base: {layers: 2, heads: 2, embed: 64, context: 64}
budget: {steps: 300}
seeds: [1, 2]
baseline: baseline
variants:
  baseline: {}
  rope: {positions: rope}
)", "demo.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const ComparisonPlan plan = ComparisonPlan::ForGrid(*grid);
  EXPECT_EQ(plan.experiment, "demo");
  EXPECT_EQ(plan.baseline, "baseline");
  EXPECT_EQ(plan.variants, (std::vector<std::string>{"baseline", "rope"}));
  EXPECT_EQ(plan.seeds, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(plan.budget.steps, 300);
  EXPECT_DOUBLE_EQ(plan.noise_floor, 0.002);
}

}  // namespace
}  // namespace smallem
