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

// Two of the shapes whose rates exceeded 5 % before the log-linear form and
// the curve's model error entered (docs/equal-time.md § Calibration):
// between three budgets of the plateau curve with 5 seeds (was 9.2 %) and
// the log-linear curve with five budgets and 2 seeds (was 8.8 % at a
// point). The third, the plateau with five budgets, refits the four-parameter
// form ~220 times per experiment: too slow for a bounded test; the bench
// measures it.
TEST(CalibrationTest, NullFalseVerdictRateOnOtherShapesIsUnderFivePercent) {
  struct Shape {
    TrueCurve curve;
    int budgets, seeds;
    VariantTime where;
  };
  for (const Shape& s : {Shape{TrueCurve::kPlateau, 3, 5, VariantTime::kBetween},
                         Shape{TrueCurve::kLogLinear, 5, 2, VariantTime::kAtPoint}}) {
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
