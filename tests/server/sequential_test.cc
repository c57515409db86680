#include "server/analysis/sequential.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "server/analysis/group_sequential.h"

namespace smallem {
namespace {

TEST(SequentialTest, OneLookIsTheFixedDesign) {
  absl::StatusOr<std::vector<LookLevel>> levels = LookLevels({.looks = {10}});
  ASSERT_TRUE(levels.ok()) << levels.status();
  ASSERT_EQ(levels->size(), 1u);
  EXPECT_NEAR((*levels)[0].alpha, 0.05, 1e-6);
  EXPECT_NEAR((*levels)[0].equivalence_alpha, 0.05, 1e-6);
}

// Three equally spaced looks, O'Brien–Fleming: c_k = 3.471, 2.454, 2.004,
// whose two-sided nominal levels are 0.00052, 0.0141 and 0.0451.
TEST(SequentialTest, LevelsAreTheBoundariesNominalLevels) {
  absl::StatusOr<std::vector<LookLevel>> levels = LookLevels({.looks = {4, 8, 12}});
  ASSERT_TRUE(levels.ok()) << levels.status();
  ASSERT_EQ(levels->size(), 3u);
  EXPECT_NEAR((*levels)[0].alpha, NominalLevel(3.471), 2e-5);
  EXPECT_NEAR((*levels)[1].alpha, NominalLevel(2.454), 2e-5);
  EXPECT_NEAR((*levels)[2].alpha, NominalLevel(2.004), 2e-5);
  // Each one-sided test of equivalence from the two-sided 10 % design.
  absl::StatusOr<std::vector<double>> ten =
      GroupSequentialBoundaries(BoundaryShape::kOBrienFleming, {1 / 3.0, 2 / 3.0, 1}, 0.10);
  ASSERT_TRUE(ten.ok());
  EXPECT_NEAR((*levels)[2].equivalence_alpha, NominalLevel((*ten)[2]) / 2, 1e-12);
  EXPECT_LT((*levels)[0].equivalence_alpha, (*levels)[2].equivalence_alpha);
}

// Five of ten seeds, SE = 0.002: f = 1/2, SE_K = 0.0014142, the final
// estimate's sd 0.001; t₀.₉₇₅(18) = 2.1009220, so the last look's bar is
// max(0.002, 2.1009220·0.0014142) = 0.0029712; equivalence is out of reach
// (0.002 − t₀.₉₅(18)·SE_K < 0).
//   Δ = 0:      P = 2·(1 − Φ(2.9712)) = 0.0029668
//   Δ = 0.004:  P = 1 − Φ(−1.0288) + 1 − Φ(6.9712) = 0.8482243
// SE = 0.0005, Δ = 0.0005: the bar is the floor, equivalence's margin
// 0.002 − 1.7340636·0.00035355 = 0.0013869: P ≈ 0.9998057.
TEST(SequentialTest, ConditionalPowerUnderTheCurrentTrendByHand) {
  const LookLevel last{.seeds = 10, .alpha = 0.05, .equivalence_alpha = 0.05};
  EXPECT_NEAR(ConditionalPower(0, 0.002, 5, last, 0.002), 0.0029668, 1e-6);
  EXPECT_NEAR(ConditionalPower(0.004, 0.002, 5, last, 0.002), 0.8482243, 1e-6);
  EXPECT_NEAR(ConditionalPower(-0.004, 0.002, 5, last, 0.002), 0.8482243, 1e-6);
  EXPECT_NEAR(ConditionalPower(0.0005, 0.0005, 5, last, 0.002), 0.9998057, 1e-6);
}

// kFutility at the second of looks [3, 5, 10] (the last at the fixed
// design's levels), SE = 0.002: the conditional power above is
// 1 − Φ((0.0029712 − Δ)/0.001) + 1 − Φ((0.0029712 + Δ)/0.001), 0.1 at
// Δ ≈ 0.0016896. Δ = 0.0016: 0.0852 stops the arm; Δ = 0.0018: 0.1208 does
// not, nor Δ = 0.004 (0.848).
TEST(SequentialTest, FutilityStopsBelowTheConditionalPowerBound) {
  const std::vector<LookLevel> levels = {{.seeds = 3, .alpha = 0.0003, .equivalence_alpha = 0.001},
                                         {.seeds = 5, .alpha = 0.005, .equivalence_alpha = 0.009},
                                         {.seeds = 10, .alpha = 0.05, .equivalence_alpha = 0.05}};
  std::optional<double> stop = FutilityStop(kFutility, levels, 1, 0, 0.002, 0.002);
  ASSERT_TRUE(stop.has_value());
  EXPECT_NEAR(*stop, 0.0029668, 1e-6);
  stop = FutilityStop(kFutility, levels, 1, -0.0016, 0.002, 0.002);
  ASSERT_TRUE(stop.has_value());
  EXPECT_NEAR(*stop, 0.0852, 1e-4);
  EXPECT_FALSE(FutilityStop(kFutility, levels, 1, -0.0018, 0.002, 0.002).has_value());
  EXPECT_FALSE(FutilityStop(kFutility, levels, 1, 0.004, 0.002, 0.002).has_value());
}

// Never at the first look by default (its ν = 4 trend is too noisy), never
// at the last (undecided there is the design's end), never without an SE,
// never with the rule off.
TEST(SequentialTest, FutilityDoesNotStopOutsideItsLooks) {
  const std::vector<LookLevel> levels = {{.seeds = 3, .alpha = 0.0003, .equivalence_alpha = 0.001},
                                         {.seeds = 5, .alpha = 0.005, .equivalence_alpha = 0.009},
                                         {.seeds = 10, .alpha = 0.05, .equivalence_alpha = 0.05}};
  EXPECT_FALSE(FutilityStop(kFutility, levels, 0, 0, 0.002, 0.002).has_value());
  EXPECT_TRUE(FutilityStop({.below = 0.1, .from_look = 1}, levels, 0, 0, 0.002, 0.002));
  EXPECT_FALSE(FutilityStop(kFutility, levels, 2, 0, 0.002, 0.002).has_value());
  EXPECT_FALSE(FutilityStop(kFutility, levels, 1, 0, std::nullopt, 0.002).has_value());
  EXPECT_FALSE(FutilityStop(FutilityRule{}, levels, 1, 0, 0.002, 0.002).has_value());
}

TEST(SequentialTest, LooksMustIncreaseFromTwoSeeds) {
  EXPECT_FALSE(LookLevels({.looks = {1, 3}}).ok());
  EXPECT_FALSE(LookLevels({.looks = {3, 3, 5}}).ok());
  EXPECT_FALSE(LookLevels({.looks = {}}).ok());
}

}  // namespace
}  // namespace smallem
