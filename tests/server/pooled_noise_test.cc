#include "server/analysis/pooled_noise.h"

#include <gtest/gtest.h>

#include <cmath>

namespace smallem {
namespace {

// B = 1.500/1.502/1.504 (s² = 4e-6, df 2), V = 1.490/1.492 (s² = 2e-6, df 1):
//   σ² = (2·4e-6 + 1·2e-6)/3 = 3.3333e-6, σ = 0.0018257, df 3.
// V − B with two seeds in V: pooled SE = σ·√(1/2 + 1/3) = 0.0016667,
//   t₀.₉₇₅(3) = 3.1824463, τ = t·SE = 0.0053041, Δ = −0.011 → 2.07τ;
//   95 % CI [−0.0163041, −0.0056959].
TEST(NoiseModelTest, PooledSigmaAndPooledStandardError) {
  const std::vector<double> b = {1.500, 1.502, 1.504}, v = {1.490, 1.492};
  const NoiseModel noise = PoolNoise({"base", "v"}, {b, v});
  ASSERT_TRUE(noise.sigma.has_value());
  EXPECT_NEAR(*noise.sigma, std::sqrt(1e-5 / 3), 1e-12);
  EXPECT_EQ(noise.df, 3);
  EXPECT_NEAR(*noise.arms[0].stddev, 0.002, 1e-12);

  const Difference d = CompareMeans(v, b, noise, 0.002);
  EXPECT_EQ(d.method, SeMethod::kPooled);
  EXPECT_NEAR(d.delta, -0.011, 1e-12);
  EXPECT_NEAR(*d.se, std::sqrt(1e-5 / 3 * 5 / 6), 1e-12);
  EXPECT_DOUBLE_EQ(*d.df, 3);
  EXPECT_NEAR(*d.t, 3.1824463, 1e-6);
  EXPECT_NEAR(d.tau, 0.0053041, 1e-6);
  EXPECT_NEAR(*d.ci_low, -0.0163041, 1e-6);
  EXPECT_NEAR(*d.ci_high, -0.0056959, 1e-6);
}

// W = 1.480/1.484/1.488 (s² = 16e-6) against B, three seeds each: Welch.
//   a = 16e-6/3, b = 4e-6/3, SE = √(a + b) = 0.0025820,
//   ν = (a + b)²/(a²/2 + b²/2) = 2.9412, t₀.₉₇₅(2.9412) = 3.21876,
//   τ = 0.0083108, Δ = −0.018 → 2.17τ.
TEST(NoiseModelTest, WelchWithThreeSeedsInBothArms) {
  const std::vector<double> b = {1.500, 1.502, 1.504}, w = {1.480, 1.484, 1.488};
  const Difference d = CompareMeans(w, b, PoolNoise({"b", "w"}, {b, w}), 0.002);
  EXPECT_EQ(d.method, SeMethod::kWelch);
  EXPECT_NEAR(*d.se, 0.0025819889, 1e-9);
  EXPECT_NEAR(*d.df, 2.9411765, 1e-6);
  EXPECT_NEAR(d.tau, 0.0083108, 1e-5);
}

TEST(NoiseModelTest, FloorWhenTheNoiseIsSmallOrUnmeasured) {
  const std::vector<double> b = {1.5}, v = {1.49};
  const NoiseModel none = PoolNoise({"b", "v"}, {b, v});
  EXPECT_FALSE(none.sigma.has_value());
  const Difference d = CompareMeans(v, b, none, 0.002);
  EXPECT_EQ(d.method, SeMethod::kNone);
  EXPECT_DOUBLE_EQ(d.tau, 0.002);
  EXPECT_FALSE(d.ci_low.has_value());
  // Tiny noise: t·SE under the floor, τ is the floor.
  const std::vector<double> b2 = {1.5, 1.5001}, v2 = {1.49, 1.4901};
  EXPECT_DOUBLE_EQ(CompareMeans(v2, b2, PoolNoise({"b", "v"}, {b2, v2}), 0.002).tau, 0.002);
}

// A (s² = 1e-8) against B and C (s² = 4e-4 each, pooled df 4): F = 2.5e-5 at
// (2, 4); F(2, 4) has CDF 1 − (4/(4 + 2F))² ≈ 2.5e-5, so p ≈ 5e-5 < 1 %.
TEST(NoiseModelTest, FTestFlagsAnArmWhoseNoiseDeparts) {
  const NoiseModel noise = PoolNoise(
      {"a", "b", "c"}, {{1.0, 1.0001, 1.0002}, {1.50, 1.52, 1.54}, {2.00, 2.02, 2.04}});
  const ArmNoise& a = noise.arms[0];
  ASSERT_TRUE(a.f_ratio.has_value());
  EXPECT_NEAR(*a.f_ratio, 2.5e-5, 1e-9);
  EXPECT_EQ(*a.f_df_rest, 4);
  EXPECT_NEAR(*a.f_p, 2 * (1 - std::pow(4 / (4 + 5e-5), 2)), 1e-9);
  EXPECT_TRUE(a.departs);
  EXPECT_FALSE(noise.arms[1].departs);
}

}  // namespace
}  // namespace smallem
