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

TEST(CalibrationTest, LargeDifferencesAreFound) {
  const SimulationResult r =
      Simulate({.experiments = 500, .seeds = 5, .true_delta = -0.008, .seed = 13});
  EXPECT_GT(r.better, 450);
  EXPECT_EQ(r.worse, 0);
}

}  // namespace
}  // namespace smallem
