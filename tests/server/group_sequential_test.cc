#include "server/analysis/group_sequential.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"

namespace smallem {
namespace {

std::vector<double> Equal(int looks) {
  std::vector<double> fractions;
  for (int k = 1; k <= looks; ++k) fractions.push_back(static_cast<double>(k) / looks);
  return fractions;
}

// Published constants, two-sided α = 0.05, equally spaced looks (Pocock
// 1977; O'Brien and Fleming 1979; Jennison and Turnbull, Group Sequential
// Methods, tables 2.1 and 2.3), to their three decimals.
TEST(GroupSequentialTest, PocockConstantsMatchThePublishedOnes) {
  absl::StatusOr<std::vector<double>> two = GroupSequentialBoundaries(
      BoundaryShape::kPocock, Equal(2), 0.05);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_NEAR((*two)[0], 2.178, 5e-4);
  EXPECT_DOUBLE_EQ((*two)[0], (*two)[1]);
  absl::StatusOr<std::vector<double>> three = GroupSequentialBoundaries(
      BoundaryShape::kPocock, Equal(3), 0.05);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_NEAR((*three)[2], 2.289, 5e-4);
}

TEST(GroupSequentialTest, OBrienFlemingBoundariesMatchThePublishedOnes) {
  absl::StatusOr<std::vector<double>> z = GroupSequentialBoundaries(
      BoundaryShape::kOBrienFleming, Equal(3), 0.05);
  ASSERT_TRUE(z.ok()) << z.status();
  ASSERT_EQ(z->size(), 3u);
  EXPECT_NEAR((*z)[0], 3.471, 5e-4);
  EXPECT_NEAR((*z)[1], 2.454, 5e-4);
  EXPECT_NEAR((*z)[2], 2.004, 5e-4);
}

TEST(GroupSequentialTest, OneLookIsTheFixedDesign) {
  absl::StatusOr<std::vector<double>> z =
      GroupSequentialBoundaries(BoundaryShape::kPocock, {1.0}, 0.05);
  ASSERT_TRUE(z.ok());
  EXPECT_NEAR((*z)[0], 1.959964, 1e-5);
}

// The integration against a simulation of the statistic itself: partial
// sums of i.i.d. normals seen at looks 3, 5 and 10 (unequal spacing).
TEST(GroupSequentialTest, CrossingProbabilityAgreesWithSimulation) {
  const std::vector<double> fractions = {0.3, 0.5, 1.0};
  const std::vector<double> z = {2.3, 2.3, 2.3};
  const double exact = CrossingProbability(fractions, z);
  std::mt19937_64 rng(7);
  constexpr int kTrials = 200'000;
  int crossed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    double sum = 0;
    int n = 0;
    for (int k = 0; k < 3; ++k) {
      for (; n < static_cast<int>(std::lround(fractions[k] * 10)); ++n) sum += StandardNormal(rng);
      if (std::abs(sum / std::sqrt(n)) >= z[k]) {
        ++crossed;
        break;
      }
    }
  }
  const double simulated = static_cast<double>(crossed) / kTrials;
  // Binomial SE at p ≈ 0.045 over 200 000 trials: 0.00046.
  EXPECT_NEAR(exact, simulated, 4 * std::sqrt(exact * (1 - exact) / kTrials));
  EXPECT_GT(exact, NominalLevel(2.3));
}

TEST(GroupSequentialTest, TBoundaryKeepsTheNominalLevel) {
  const double t = TBoundary(2.178, 4);
  EXPECT_NEAR(2 * (1 - StudentTCdf(t, 4)), NominalLevel(2.178), 1e-10);
  EXPECT_GT(t, 2.178);
  EXPECT_NEAR(TBoundary(1.959964, 4), 2.776445, 1e-5);
}

TEST(GroupSequentialTest, RejectsFractionsThatDoNotIncrease) {
  EXPECT_FALSE(GroupSequentialBoundaries(BoundaryShape::kPocock, {0.5, 0.5, 1}, 0.05).ok());
  EXPECT_FALSE(GroupSequentialBoundaries(BoundaryShape::kPocock, {0.5, 1.2}, 0.05).ok());
  EXPECT_FALSE(GroupSequentialBoundaries(BoundaryShape::kPocock, {1}, 1.5).ok());
}

}  // namespace
}  // namespace smallem
