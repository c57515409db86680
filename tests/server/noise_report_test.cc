#include "server/analysis/noise_report.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;

ComparedRun Finished(const std::string& variant, int64_t seed, double loss) {
  return MakeRun(variant, seed, 300, RunState::kSucceeded, loss, 10, "cpu", 1000);
}

Report Compare(const std::vector<ComparedRun>& runs, std::vector<int64_t> seeds) {
  ComparisonPlan plan;
  plan.experiment = "noise";
  plan.baseline = "base";
  plan.variants = {"base", "better"};
  plan.seeds = std::move(seeds);
  plan.budget.steps = 300;
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

TEST(StudentTTest, QuantilesMatchTheTable) {
  EXPECT_NEAR(StudentT975(1), 12.7062, 1e-4);
  EXPECT_NEAR(StudentT975(4), 2.7764, 1e-4);
  EXPECT_NEAR(StudentT975(10), 2.2281, 1e-4);
  EXPECT_NEAR(StudentT975(30), 2.0423, 1e-4);
  // Beyond the table: the expansion (reference values of the quantile).
  EXPECT_NEAR(StudentT975(40), 2.021075, 1e-5);
  EXPECT_NEAR(StudentT975(120), 1.979930, 1e-5);
  EXPECT_NEAR(StudentT975(100000), 1.959988, 1e-5);  // the normal's 1.959964 + 2.4e-5
  for (int df = 1; df < 200; ++df) EXPECT_GT(StudentT975(df), StudentT975(df + 1)) << df;
}

TEST(SeedsToResolveTest, HandComputed) {
  // s = 0.001 in both arms, τ = 0.002: n = 3 gives 2.7764·0.001·√(2/3) =
  // 0.002267 ≥ τ; n = 4 gives 2.4469·0.001·√(1/2) = 0.001730 < τ.
  EXPECT_EQ(SeedsToResolve(0.001, 0.001, 0.002), 4);
  // s_V = 0.002, s_B = 0.001: s_p = √2.5e-6; n = 6 gives 0.002034, n = 7 0.001841.
  EXPECT_EQ(SeedsToResolve(0.002, 0.001, 0.002), 7);
  // No spread at all: the fewest seeds that measure one.
  EXPECT_EQ(SeedsToResolve(0, 0, 0.002), 2);
  // Hopeless: the noise is a hundred times τ.
  EXPECT_EQ(SeedsToResolve(0.2, 0.2, 0.002), std::nullopt);
}

// Baseline 1.500/1.501/1.502 (s = 0.001, spread 0.002);
// better 1.490/1.492/1.494 (s = 0.002, spread 0.004).
//   Pooled: σ² = (2·1e-6 + 2·4e-6)/4 = 2.5e-6, df 4.
//   F of the baseline against the other arm: 1e-6/4e-6 = 0.25 at (2, 2),
//   whose CDF is f/(1 + f) = 0.2: p = 0.4, no departure.
//   Welch: a = 4e-6/3, b = 1e-6/3, t = −0.009/√(5e-6/3) = −6.97137,
//   ν = (a + b)² / (a²/2 + b²/2) = 50/17 = 2.94118.
TEST(NoiseTest, HandComputedThreeSeeds) {
  const Report report = Compare(
      {Finished("base", 1, 1.500), Finished("base", 2, 1.501), Finished("base", 3, 1.502),
       Finished("better", 1, 1.490), Finished("better", 2, 1.492), Finished("better", 3, 1.494)},
      {1, 2, 3});
  const NoiseReport noise = AnalyzeNoise(report);
  ASSERT_TRUE(noise.sigma.has_value());
  EXPECT_NEAR(*noise.sigma, std::sqrt(2.5e-6), 1e-12);
  EXPECT_EQ(noise.df, 4);
  ASSERT_EQ(noise.rows.size(), 2u);

  const NoiseRow& base = noise.rows[0];
  EXPECT_EQ(base.variant, "base");
  EXPECT_EQ(base.seeds, 3);
  EXPECT_NEAR(*base.spread, 0.002, 1e-12);
  EXPECT_NEAR(*base.stddev, 0.001, 1e-12);
  EXPECT_FALSE(base.welch_t.has_value());
  EXPECT_EQ(base.seeds_to_resolve, 4);
  EXPECT_NEAR(*base.f_ratio, 0.25, 1e-9);
  EXPECT_NEAR(*base.f_p, 0.4, 1e-9);
  EXPECT_FALSE(base.departs);

  const NoiseRow& better = noise.rows[1];
  EXPECT_NEAR(*better.spread, 0.004, 1e-12);
  EXPECT_NEAR(*better.stddev, 0.002, 1e-12);
  EXPECT_NEAR(*better.welch_t, -6.97137, 1e-5);
  EXPECT_NEAR(*better.welch_df, 50.0 / 17.0, 1e-9);
  EXPECT_EQ(better.seeds_to_resolve, 7);
  // The same statistic as the comparator's.
  EXPECT_NEAR(*better.welch_t, *report.rows[1].welch_t, 1e-12);
}

// s_p² = (s_V² + s_B²)/2 = (4.5e-6 + 5e-7)/2, s_p = 0.0015811: seeds to
// resolve the floor 7 (n = 6: t₀.₉₇₅(10)·s_p·√(2/6) = 0.0020342); over
// s_p's 95 % interval (d = 2: ×0.52066 … ×6.2847) from 3 to 191.
TEST(NoiseTest, TwoSeedsGiveSpreadAndSeedsToResolveButNoWelch) {
  const Report report = Compare({Finished("base", 1, 1.500), Finished("base", 2, 1.501),
                                 Finished("better", 1, 1.490), Finished("better", 2, 1.493)},
                                {1, 2});
  const NoiseReport noise = AnalyzeNoise(report);
  EXPECT_NEAR(*noise.rows[1].spread, 0.003, 1e-12);
  EXPECT_NEAR(*noise.rows[1].stddev, 0.003 / std::sqrt(2.0), 1e-12);
  EXPECT_FALSE(noise.rows[1].welch_t.has_value());
  EXPECT_EQ(noise.rows[1].seeds_to_resolve, 7);
  EXPECT_EQ(noise.rows[1].seeds_to_resolve_low, 3);
  EXPECT_EQ(noise.rows[1].seeds_to_resolve_high, 191);
  ASSERT_FALSE(noise.notes.empty());
  EXPECT_THAT(noise.notes[0], HasSubstr("three or more seeds per arm"));
}

TEST(NoiseTest, OneSeedHasNoSpread) {
  const Report report = Compare({Finished("base", 1, 1.500), Finished("better", 1, 1.49)}, {1});
  const NoiseReport noise = AnalyzeNoise(report);
  EXPECT_FALSE(noise.rows[0].spread.has_value());
  EXPECT_FALSE(noise.rows[0].stddev.has_value());
  EXPECT_FALSE(noise.sigma.has_value());
  ASSERT_FALSE(noise.notes.empty());
  EXPECT_THAT(noise.notes[0], HasSubstr("the noise was not measured"));
}

}  // namespace
}  // namespace smallem
