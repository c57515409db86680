#include "server/analysis/distributions.h"

#include <gtest/gtest.h>

#include <cmath>

namespace smallem {
namespace {

// Closed forms for integer parameters: I_x(a, b) = P(Binomial(a + b − 1, x) ≥ a).
TEST(DistributionsTest, IncompleteBetaMatchesBinomialTails) {
  EXPECT_NEAR(RegularizedIncompleteBeta(0.5, 2, 3), 11.0 / 16, 1e-13);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.3, 1, 1), 0.3, 1e-13);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.9, 3, 1), 0.729, 1e-13);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.2, 0.5, 1), std::sqrt(0.2), 1e-13);
  EXPECT_EQ(RegularizedIncompleteBeta(0, 2, 3), 0);
  EXPECT_EQ(RegularizedIncompleteBeta(1, 2, 3), 1);
}

// Student's t table (two-sided 5 % and 1 %), and a fractional df between
// its neighbours (value by numerical integration of the density).
TEST(DistributionsTest, StudentQuantilesMatchTheTable) {
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.7062047, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.3026527, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 3), 3.1824463, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.2281389, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.0422725, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e6), 1.959966, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.995, 10), 3.1692727, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 2.9411765), 3.21876, 1e-4);
  EXPECT_NEAR(StudentTQuantile(0.025, 4), -2.7764451, 1e-6);
  EXPECT_NEAR(StudentTCdf(2.2281389, 10), 0.975, 1e-8);
}

TEST(DistributionsTest, FQuantilesMatchTheTable) {
  EXPECT_NEAR(FQuantile(0.99, 2, 10), 7.5594, 1e-4);
  EXPECT_NEAR(FQuantile(0.95, 3, 10), 3.7083, 1e-4);
  EXPECT_NEAR(FQuantile(0.99, 1, 10), 10.0443, 1e-4);
  EXPECT_NEAR(FQuantile(0.995, 4, 8), 8.8051, 1e-3);
  // F(2, d) has the closed form CDF 1 − (d/(d + 2f))^(d/2).
  EXPECT_NEAR(FCdf(3, 2, 4), 1 - std::pow(4.0 / 10, 2), 1e-13);
}

// χ² table values; χ²(2) has the closed form CDF 1 − e^(−x/2).
TEST(DistributionsTest, ChiSquaredQuantilesMatchTheTable) {
  EXPECT_NEAR(ChiSquaredQuantile(0.975, 2), 7.3777589, 1e-6);
  EXPECT_NEAR(ChiSquaredQuantile(0.025, 2), 0.0506356, 1e-7);
  EXPECT_NEAR(ChiSquaredQuantile(0.95, 10), 18.3070381, 1e-6);
  EXPECT_NEAR(ChiSquaredQuantile(0.05, 1), 0.00393214, 1e-8);
  EXPECT_NEAR(ChiSquaredCdf(3, 2), 1 - std::exp(-1.5), 1e-13);
  EXPECT_NEAR(ChiSquaredCdf(30, 4), 1 - std::exp(-15) * (1 + 15), 1e-13);
}

}  // namespace
}  // namespace smallem
