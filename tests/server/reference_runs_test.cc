#include "server/analysis/reference_runs.h"

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
using testing::Steps;


CurvePoint Point(int64_t steps, double seconds, double loss) {
  CurvePoint p;
  p.budget = Steps(steps);
  p.seconds = seconds;
  p.loss = loss;
  return p;
}

// Four AdamW lengths, each twice the previous one (numbers of the right
// shape, not the article's): 1500 steps in 6 min, 3000 in 12, 6000 in 24,
// 12000 in 48.
std::vector<CurvePoint> FourPoints() {
  return {Point(1500, 360, 1.05), Point(3000, 720, 0.99), Point(6000, 1440, 0.9592),
          Point(12000, 2880, 0.9247)};
}

TEST(TimeCurveTest, ExactAtThePoints) {
  absl::StatusOr<TimeCurve> curve = TimeCurve::Create(FourPoints());
  ASSERT_TRUE(curve.ok()) << curve.status();
  for (const CurvePoint& p : FourPoints()) {
    const Interpolated r = curve->Interpolate(p.seconds);
    EXPECT_EQ(r.value, p.loss) << p.seconds;
    EXPECT_FALSE(r.extrapolated);
    EXPECT_EQ(r.span_ratio, 1);
  }
}

TEST(TimeCurveTest, LinearInLogTimeBetweenPoints) {
  absl::StatusOr<TimeCurve> curve = TimeCurve::Create(FourPoints());
  ASSERT_TRUE(curve.ok());
  // The geometric mean of two points' times is half-way in log time.
  const double t = std::sqrt(1440.0 * 2880.0);
  EXPECT_NEAR(curve->Interpolate(t).value, (0.9592 + 0.9247) / 2, 1e-12);
  // A quarter of the way in log time from 360 s to 720 s: 360·2^0.25.
  EXPECT_NEAR(curve->Interpolate(360 * std::pow(2.0, 0.25)).value, 1.05 + 0.25 * (0.99 - 1.05),
              1e-12);
  // A variant taking 25 minutes: between the 24- and 48-minute points.
  const Interpolated at25 = curve->Interpolate(25 * 60);
  EXPECT_FALSE(at25.extrapolated);
  EXPECT_NEAR(at25.value, 0.9592 + std::log(1500.0 / 1440.0) / std::log(2.0) * (0.9247 - 0.9592),
              1e-12);
}

TEST(TimeCurveTest, MonotoneBetweenPointsAndWithinEachSegment) {
  absl::StatusOr<TimeCurve> curve = TimeCurve::Create(FourPoints());
  ASSERT_TRUE(curve.ok());
  const std::vector<CurvePoint> pts = FourPoints();
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    double previous = curve->Interpolate(pts[i].seconds).value;
    for (int k = 1; k <= 1000; ++k) {
      const double t = pts[i].seconds * std::pow(pts[i + 1].seconds / pts[i].seconds, k / 1000.0);
      const Interpolated r = curve->Interpolate(t);
      EXPECT_FALSE(r.extrapolated);
      EXPECT_LE(r.value, previous) << t;  // the losses decrease, so does R
      EXPECT_LE(r.value, pts[i].loss);
      EXPECT_GE(r.value, pts[i + 1].loss);
      previous = r.value;
    }
  }
}

TEST(TimeCurveTest, MonotoneEvenWhereTheLossRises) {
  // A noisy curve whose loss rises between two points: R stays between them.
  absl::StatusOr<TimeCurve> curve =
      TimeCurve::Create({Point(100, 10, 2.0), Point(200, 20, 2.1), Point(400, 40, 1.8)});
  ASSERT_TRUE(curve.ok());
  double previous = 2.0;
  for (double t = 10; t <= 20; t += 0.01) {
    const double v = curve->Interpolate(t).value;
    EXPECT_GE(v, previous - 1e-15);
    EXPECT_LE(v, 2.1);
    previous = v;
  }
}

TEST(TimeCurveTest, ExtrapolationIsFlaggedWithHowFar) {
  absl::StatusOr<TimeCurve> curve = TimeCurve::Create(FourPoints());
  ASSERT_TRUE(curve.ok());
  // Below the first point: along the first segment, 0.8 × its time.
  const Interpolated below = curve->Interpolate(288);
  EXPECT_TRUE(below.extrapolated);
  EXPECT_DOUBLE_EQ(below.span_ratio, 0.8);
  EXPECT_NEAR(below.value, 1.05 + std::log(0.8) / std::log(2.0) * (0.99 - 1.05), 1e-12);
  EXPECT_GT(below.value, 1.05);
  // Beyond the last: along the last segment, 1.5 × its time.
  const Interpolated above = curve->Interpolate(4320);
  EXPECT_TRUE(above.extrapolated);
  EXPECT_DOUBLE_EQ(above.span_ratio, 1.5);
  EXPECT_NEAR(above.value, 0.9247 + std::log(1.5) / std::log(2.0) * (0.9247 - 0.9592), 1e-12);
}

TEST(TimeCurveTest, PointsInAnyOrderAreSortedByTime) {
  std::vector<CurvePoint> shuffled = {FourPoints()[2], FourPoints()[0], FourPoints()[3],
                                      FourPoints()[1]};
  absl::StatusOr<TimeCurve> curve = TimeCurve::Create(shuffled);
  ASSERT_TRUE(curve.ok());
  EXPECT_EQ(curve->first_seconds(), 360);
  EXPECT_EQ(curve->last_seconds(), 2880);
  EXPECT_EQ(curve->points()[1].budget.steps, 3000);
}

TEST(TimeCurveTest, DegenerateCurvesAreClearErrors) {
  absl::StatusOr<TimeCurve> one = TimeCurve::Create({Point(1500, 360, 1.05)});
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("at least two points"));
  absl::StatusOr<TimeCurve> zero = TimeCurve::Create({Point(1500, 0, 1.05), Point(3000, 10, 1)});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("1500 steps has training time 0"));
  absl::StatusOr<TimeCurve> same =
      TimeCurve::Create({Point(1500, 360, 1.05), Point(3000, 360, 1.0)});
  ASSERT_FALSE(same.ok());
  EXPECT_THAT(same.status().message(), HasSubstr("took the same training time"));
}

TEST(GatherReferenceRunsTest, MeansPerBudgetOnOneDeviceClass) {
  ReferencePlan plan{
      .budgets = {Steps(100), Steps(200), Steps(400)}, .seeds = {1, 2}, .shared_variant = "base"};
  const RunState ok = RunState::kSucceeded;
  std::vector<ComparedRun> runs = {
      MakeRun("reference", 1, 100, ok, 2.0, 10), MakeRun("reference", 2, 100, ok, 2.2, 12),
      // The baseline's own cells serve as the 200-step point (shared spec).
      MakeRun("base", 1, 200, ok, 1.8, 20), MakeRun("base", 2, 200, ok, 1.9, 22),
      MakeRun("reference", 1, 400, ok, 1.6, 40), MakeRun("reference", 2, 400, RunState::kFailed),
      // Another class, another variant, another budget: not part of the curve.
      MakeRun("reference", 2, 400, ok, 1.5, 30, "cuda:H200"), MakeRun("other", 1, 200, ok, 0.1, 1),
      MakeRun("reference", 1, 800, ok, 0.1, 1)};
  absl::StatusOr<ReferenceRuns> got = GatherReferenceRuns(plan, runs, "cpu");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->points.size(), 2u);
  EXPECT_EQ(got->points[0].budget.steps, 100);
  EXPECT_DOUBLE_EQ(got->points[0].seconds, 11);
  EXPECT_DOUBLE_EQ(got->points[0].loss, 2.1);
  EXPECT_EQ(got->points[0].seed_steps, (std::vector<int64_t>{100, 100}));
  EXPECT_EQ(got->points[1].budget.steps, 200);
  EXPECT_DOUBLE_EQ(got->points[1].seconds, 21);
  EXPECT_DOUBLE_EQ(got->points[1].loss, 1.85);
  ASSERT_EQ(got->pending.size(), 1u);
  EXPECT_EQ(got->pending[0], "400 steps: 1 of 2 seeds finished, 1 failed");
  EXPECT_EQ(got->finished, 5);
  EXPECT_EQ(got->finished_elsewhere, 1);
  EXPECT_EQ(got->other_classes, (std::vector<std::string>{"cuda:H200"}));
  EXPECT_EQ(ReferenceDeviceClass(plan, runs), "cpu");
}

TEST(GatherReferenceRunsTest, MinutesBudgetsTakeTheirStepsFromTheResults) {
  const Budget one{.steps = std::nullopt, .minutes = 1.0};
  const Budget two{.steps = std::nullopt, .minutes = 2.0};
  ReferencePlan plan{.budgets = {one, two}, .seeds = {1}, .shared_variant = ""};
  ComparedRun a = MakeRun("reference", 1, 0, RunState::kSucceeded, 1.2, 60.01);
  a.budget = one;
  a.steps = 410;
  ComparedRun b = MakeRun("reference", 1, 0, RunState::kSucceeded, 1.1, 120.02);
  b.budget = two;
  b.steps = 822;
  absl::StatusOr<ReferenceRuns> got = GatherReferenceRuns(plan, {b, a}, "cpu");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->points.size(), 2u);
  EXPECT_EQ(got->points[0].budget.minutes, 1.0);
  EXPECT_DOUBLE_EQ(got->points[0].seconds, 60.01);
  EXPECT_EQ(got->points[0].seed_steps, (std::vector<int64_t>{410}));
  EXPECT_EQ(got->points[1].seed_steps, (std::vector<int64_t>{822}));
}

TEST(GatherReferenceRunsTest, DuplicateFinishedRunsAreAnError) {
  ReferencePlan plan{.budgets = {Steps(100)}, .seeds = {1}, .shared_variant = ""};
  std::vector<ComparedRun> runs = {MakeRun("reference", 1, 100, RunState::kSucceeded, 2.0, 10),
                                   MakeRun("reference", 1, 100, RunState::kSucceeded, 2.1, 11)};
  absl::StatusOr<ReferenceRuns> got = GatherReferenceRuns(plan, runs, "cpu");
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("two finished reference runs at 100 steps"));
}

}  // namespace
}  // namespace smallem
