#include "server/analysis/calibration.h"

#include <gtest/gtest.h>

#include <cmath>

namespace smallem {
namespace {

// Bounded versions of bench/calibration_bench.cc (docs/equal-time.md
// § Calibration): the false-verdict rate on null experiments stays under
// 5 % (binomial SE at these counts ≤ 0.5 %, so the margin is real).
TEST(CalibrationTest, NullFalseVerdictRateAtEqualStepsIsUnderFivePercent) {
  for (int seeds : {2, 3, 5}) {
    const SimulationResult r = Simulate({.experiments = 2000, .seeds = seeds, .seed = 11});
    EXPECT_EQ(r.experiments, 2000);
    EXPECT_LE(r.VerdictRate(), 0.05) << seeds << " seeds";
  }
}

TEST(CalibrationTest, NullFalseVerdictRateAtEqualTimeIsUnderFivePercent) {
  for (VariantTime where : {VariantTime::kAtPoint, VariantTime::kBetween}) {
    const SimulationResult r = Simulate({.experiments = 400, .seeds = 3, .budgets = 4,
                                         .where = where, .equal_time = true, .seed = 12});
    EXPECT_LE(r.VerdictRate(), 0.05) << (where == VariantTime::kAtPoint ? "at" : "between");
  }
}

// The shapes whose rates exceeded 5 % in earlier versions
// (docs/equal-time.md § Calibration): between three budgets of the plateau
// curve with 5 seeds (9.2 % before the curve's model error entered τ), the
// log-linear curve with five budgets and 2 seeds (8.8 % at a point before the
// log-linear form) and the plateau with five budgets and 5 seeds
// (5.5–6.2 %). The five-budget plateau refits its four-parameter form ~220
// times per experiment, from the curve's own fit (RefitFormNear). Rows whose
// rate is the nominal 5 % (the power law with 5 seeds, where the model is
// right and τ exceeds the floor) need the bench's 10,000 experiments: a few
// hundred cannot tell 5 % from 6 %.
TEST(CalibrationTest, NullFalseVerdictRateOnOtherShapesIsUnderFivePercent) {
  struct Shape {
    TrueCurve curve;
    int budgets, seeds;
    VariantTime where;
  };
  for (const Shape& s : {Shape{TrueCurve::kPlateau, 3, 5, VariantTime::kBetween},
                         Shape{TrueCurve::kLogLinear, 5, 2, VariantTime::kAtPoint},
                         Shape{TrueCurve::kPlateau, 5, 5, VariantTime::kBetween}}) {
    const SimulationResult r =
        Simulate({.experiments = 300, .seeds = s.seeds, .budgets = s.budgets, .curve = s.curve,
                  .where = s.where, .equal_time = true, .seed = 14});
    EXPECT_EQ(r.experiments, 300);
    EXPECT_LE(r.VerdictRate(), 0.05) << TrueCurveName(s.curve) << ", " << s.budgets
                                     << " budgets, " << s.seeds << " seeds";
  }
}

TEST(CalibrationTest, LargeDifferencesAreFound) {
  const SimulationResult r =
      Simulate({.experiments = 500, .seeds = 5, .true_delta = -0.008, .seed = 13});
  EXPECT_GT(r.better, 450);
  EXPECT_EQ(r.worse, 0);
}

// Sequential seeds (looks at 3, 5 and 10 seeds per arm, O'Brien–Fleming),
// bounded versions of the bench's sequential table: over all looks, null
// experiments get a false better/worse at the nominal 5 % (the bench: see
// docs/equal-time.md § Sequential seeds), where three uncorrected looks
// reach about 10 %; a true |Δ| = floor is called equivalent at most 5 % of
// the time (0.53 %); and on a mixture of effects the design keeps the fixed
// 10-seed design's power with fewer runs.
TEST(CalibrationTest, SequentialNullFalseVerdictsOverAllLooksStayAtFivePercent) {
  constexpr int kExperiments = 2000;
  const SequentialResult r = SimulateSequential({.experiments = kExperiments, .seed = 21});
  const SequentialResult naive =
      SimulateSequential({.experiments = kExperiments, .corrected = false, .seed = 21});
  EXPECT_EQ(r.experiments, kExperiments);
  // A rate that is 5 % by design cannot be shown below 5.0 % by a bounded
  // run: allowed are two binomial SEs at 5 % (0.49 points here) above it.
  const double allowed = 0.05 + 2 * std::sqrt(0.05 * 0.95 / kExperiments);
  EXPECT_LE(r.null_false, allowed * kExperiments);
  EXPECT_GT(naive.null_false, 0.075 * kExperiments) << "uncorrected looks should inflate";
}

TEST(CalibrationTest, SequentialFalseEquivalenceAtTheFloorIsUnderFivePercent) {
  for (double delta : {0.002, -0.002}) {
    const SequentialResult r =
        SimulateSequential({.experiments = 1000, .true_delta = delta, .seed = 22});
    EXPECT_LE(r.equivalent, 0.05 * r.experiments) << delta;
  }
}

TEST(CalibrationTest, SequentialKeepsTheFixedDesignsPowerWithFewerRuns) {
  const SequentialResult sequential =
      SimulateSequential({.experiments = 1000, .mixture = true, .seed = 23});
  const SequentialResult fixed =
      SimulateSequential({.experiments = 1000, .looks = {10}, .mixture = true, .seed = 23});
  // The same experiments (one seed): the sequential design stops some early.
  EXPECT_EQ(sequential.non_null, fixed.non_null);
  EXPECT_EQ(fixed.runs, 20 * 1000);
  EXPECT_LT(sequential.runs, 0.95 * fixed.runs);
  EXPECT_GE(sequential.Power(), fixed.Power() - 0.02);
  EXPECT_GT(sequential.stopped_early, 0);
}

// Futility (server/analysis/sequential.h, kFutility): from the second look
// an arm whose conditional power under the current trend falls below 0.1
// stops undecided. With looks [3, 5, 7, 9, 11] on the mixture it spends at
// least 30 % fewer runs than the fixed 10-seed design on the same
// experiments, at that design's power within one binomial SE (the bench's
// 4000: docs/equal-time.md § Sequential seeds). Stopping early never adds a
// false verdict: on the same experiments, no more null ones called better
// or worse, no more at |Δ| = floor called equivalent, than without it.
TEST(CalibrationTest, SequentialWithFutilityKeepsTheFixedPowerWithThirtyPercentFewerRuns) {
  constexpr int kExperiments = 1000;
  const SequentialConfig design{.experiments = kExperiments, .looks = {3, 5, 7, 9, 11},
                                .futility = kFutility, .mixture = true, .seed = 23};
  SequentialConfig fixed_config = design;
  fixed_config.looks = {10};
  fixed_config.futility = {};
  const SequentialResult futile = SimulateSequential(design);
  const SequentialResult fixed = SimulateSequential(fixed_config);
  EXPECT_EQ(futile.non_null, fixed.non_null);
  EXPECT_EQ(fixed.runs, 20 * kExperiments);
  EXPECT_LE(futile.runs, 0.70 * fixed.runs);
  const double se = std::sqrt(fixed.Power() * (1 - fixed.Power()) / fixed.non_null);
  EXPECT_GE(futile.Power(), fixed.Power() - se);
  EXPECT_GT(futile.futile, 0);

  SequentialConfig null = design;
  null.mixture = false;
  SequentialConfig null_without = null;
  null_without.futility = {};
  const SequentialResult r = SimulateSequential(null);
  EXPECT_LE(r.null_false, SimulateSequential(null_without).null_false);
  EXPECT_LE(r.null_false, (0.05 + 2 * std::sqrt(0.05 * 0.95 / kExperiments)) * kExperiments);
  SequentialConfig at_floor = null;
  at_floor.true_delta = 0.002;
  SequentialConfig at_floor_without = at_floor;
  at_floor_without.futility = {};
  const SequentialResult f = SimulateSequential(at_floor);
  EXPECT_LE(f.equivalent, SimulateSequential(at_floor_without).equivalent);
  EXPECT_LE(f.equivalent, 0.05 * kExperiments);
}

}  // namespace
}  // namespace smallem
