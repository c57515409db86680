// CompareNullSplits: every split of one configuration's seeds into two arms,
// through the real comparator (server/analysis/calibration.h).
#include "server/analysis/calibration.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "server/analysis/stats.h"

namespace smallem {
namespace {

// 7 seeds in arms of 3: C(7,3)·C(4,3) = 140 ordered splits.
TEST(NullSplitsTest, EverySplitIsComparedOnceInEachOrder) {
  const std::vector<double> losses = {1.50, 1.52, 1.49, 1.51, 1.53, 1.48, 1.50};
  const NullSplits r = CompareNullSplits(losses, 3);
  EXPECT_EQ(r.splits, 140);
  EXPECT_EQ(r.better + r.worse + r.equivalent + r.undecided, r.splits);
  // (A, B) better is (B, A) worse.
  EXPECT_EQ(r.better, r.worse);
}

// Seeds that agree to 10⁻⁶ show every split equivalent; seeds spread by
// 0.1 nats/byte show none equivalent and leave most splits undecided (the
// few decided ones put the lowest seeds in one arm and the highest in the
// other).
TEST(NullSplitsTest, TheOutcomeFollowsTheSeedsSpread) {
  const NullSplits tight =
      CompareNullSplits({1.5, 1.500001, 1.499999, 1.5000005, 1.4999995, 1.500002, 1.499998}, 3);
  EXPECT_EQ(tight.equivalent, tight.splits);
  EXPECT_EQ(tight.false_rate, 0);
  const NullSplits wide = CompareNullSplits({1.4, 1.6, 1.5, 1.35, 1.65, 1.45, 1.55}, 3);
  EXPECT_EQ(wide.equivalent, 0);
  EXPECT_GT(wide.undecided, wide.splits * 8 / 10);
}

// Ten seeds drawn from one normal: the false verdicts over the 4,200
// splits are near the 5 % the comparator promises (a loose bound: the
// splits of one draw are correlated), and the jackknife gives their spread.
TEST(NullSplitsTest, SeedsOfOneNormalGiveFalseVerdictsNearTheNominalRate) {
  std::mt19937_64 rng(5);
  std::vector<double> losses;
  for (int i = 0; i < 10; ++i) losses.push_back(1.5 + 0.01 * StandardNormal(rng));
  const NullSplits r = CompareNullSplits(losses, 3);
  EXPECT_EQ(r.splits, 120 * 35);
  EXPECT_LT(r.false_rate, 0.15);
  EXPECT_GT(r.false_rate_se, 0);
  EXPECT_LT(r.false_rate_se, 0.1);
}

}  // namespace
}  // namespace smallem
