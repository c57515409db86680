// The optimizer row ops (row_sum_squares, row_scale, with or without a
// device scale) against plain loops on the CPU backend (the CUDA kernels'
// parity is tests/gpu). They have no gradient, so no finite-difference check.
#include <cmath>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

using RowOpsTest = testing::CpuOpTest;

TEST_F(RowOpsTest, RowSumSquaresMatchesALoopWithAlphaAndBeta) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {300, 129}}) {
    const Tensor in = Random({rows, cols});
    const Tensor out = Random({rows});
    const std::vector<float> before(out.f32(), out.f32() + rows);
    backend_.RowSumSquares(RowReduceParams{.in = in, .out = out, .alpha = 0.25f, .beta = 0.5f});
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t k = 0; k < cols; ++k) sum += double{in.f32()[r * cols + k]} * in.f32()[r * cols + k];
      EXPECT_NEAR(out.f32()[r], 0.25 * sum + 0.5 * before[r], 1e-5 * (1 + sum));
    }
  }
}

TEST_F(RowOpsTest, RowSumSquaresWithZeroBetaIgnoresOut) {
  const Tensor in = FromValues({2, 2}, {1, 2, 3, 4});
  const Tensor out = FromValues({2}, {NAN, NAN});
  backend_.RowSumSquares(RowReduceParams{.in = in, .out = out});
  EXPECT_EQ(out.f32()[0], 5.0f);
  EXPECT_EQ(out.f32()[1], 25.0f);
}

TEST_F(RowOpsTest, RowScaleAppliesNumeratorDenominatorAndAlpha) {
  const int64_t rows = 6, cols = 5;
  const Tensor in = Random({rows, cols});
  const Tensor numer = Random({rows}, 0.5f, 2.0f);
  const Tensor denom = Random({rows}, 0.5f, 2.0f);
  const Tensor out = Zeros({rows, cols});
  backend_.RowScale(RowScaleParams{.in = in, .out = out, .numer = numer, .denom = denom,
                              .alpha = -3.0f, .eps = 0.25f});
  for (int64_t r = 0; r < rows; ++r) {
    const double f = -3.0 * std::sqrt(numer.f32()[r]) / std::sqrt(denom.f32()[r] + 0.25);
    for (int64_t k = 0; k < cols; ++k) {
      EXPECT_NEAR(out.f32()[r * cols + k], f * in.f32()[r * cols + k], 1e-5);
    }
  }
}

TEST_F(RowOpsTest, RowScaleWithoutStatisticsScalesInPlace) {
  const Tensor x = FromValues({3}, {1, -2, 4});
  backend_.RowScale(RowScaleParams{.in = x, .out = x, .alpha = 0.5f});
  EXPECT_EQ(x.f32()[0], 0.5f);
  EXPECT_EQ(x.f32()[1], -1.0f);
  EXPECT_EQ(x.f32()[2], 2.0f);
}

TEST_F(RowOpsTest, RowScaleMultipliesAlphaByTheDeviceScale) {
  const Tensor x = FromValues({2, 2}, {1, -2, 4, 8});
  const Tensor scale = FromValues({1}, {-0.25f});
  backend_.RowScale(RowScaleParams{.in = x, .out = x, .scale = scale, .alpha = 3.0f});
  EXPECT_EQ(x.f32()[0], -0.75f);
  EXPECT_EQ(x.f32()[1], 1.5f);
  EXPECT_EQ(x.f32()[2], -3.0f);
  EXPECT_EQ(x.f32()[3], -6.0f);
}

TEST_F(RowOpsTest, RowScaleKeepsAZeroRowZero) {
  const Tensor x = FromValues({2, 2}, {0, 0, 3, 4});
  const Tensor norm = FromValues({2}, {0, 25});
  backend_.RowScale(RowScaleParams{.in = x, .out = x, .denom = norm});
  EXPECT_EQ(x.f32()[0], 0.0f);
  EXPECT_EQ(x.f32()[1], 0.0f);
  EXPECT_FLOAT_EQ(x.f32()[2], 0.6f);
  EXPECT_FLOAT_EQ(x.f32()[3], 0.8f);
}

}  // namespace
}  // namespace smallem
