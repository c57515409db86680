#include "server/analysis/sequential.h"

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

TEST(SequentialTest, LooksMustIncreaseFromTwoSeeds) {
  EXPECT_FALSE(LookLevels({.looks = {1, 3}}).ok());
  EXPECT_FALSE(LookLevels({.looks = {3, 3, 5}}).ok());
  EXPECT_FALSE(LookLevels({.looks = {}}).ok());
}

}  // namespace
}  // namespace smallem
