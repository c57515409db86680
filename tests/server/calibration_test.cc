#include "server/analysis/calibration.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace smallem
