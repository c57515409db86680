// engine/cpu/vector_math.h against double-precision references: every
// length around the vector width (tails included), in place, and inputs at
// the ends of float's range.
#include "engine/cpu/vector_math.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/random.h"

namespace smallem::cpu {
namespace {

std::vector<float> RandomRow(int64_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = static_cast<float>(scale * rng.Normal());
  return row;
}

TEST(VectorMathTest, SoftmaxPiecesMatchDoublesAtEveryLength) {
  for (int64_t n = 1; n <= 70; ++n) {
    const std::vector<float> row = RandomRow(n, n, 4.0);
    double max = -1e300, sum = 0;
    for (float x : row) max = std::max(max, static_cast<double>(x));
    for (float x : row) sum += std::exp(x - max);
    EXPECT_EQ(Max(row.data(), n), static_cast<float>(max)) << "n " << n;

    std::vector<float> out(row);  // in place
    const float got = ExpShiftedSum(out.data(), static_cast<float>(max), out.data(), n);
    EXPECT_NEAR(got, sum, 1e-6 * sum) << "n " << n;
    EXPECT_NEAR(ExpShiftedSum(row.data(), static_cast<float>(max), nullptr, n), sum,
                1e-6 * sum);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], std::exp(row[i] - max), 2e-7) << "n " << n << " i " << i;
    }

    std::vector<float> acc(static_cast<size_t>(n), 1.0f);
    ScaledExpShifted(row.data(), static_cast<float>(max), 0.5f, acc.data(), true, n);
    std::vector<float> over(row);
    ScaledExpShifted(over.data(), static_cast<float>(max), 0.5f, over.data(), false, n);
    const std::vector<float> shifts = RandomRow(n, 100 + n, 1.0);
    std::vector<float> minus(row);
    ExpMinus(minus.data(), shifts.data(), minus.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double e = 0.5 * std::exp(row[i] - max);
      EXPECT_NEAR(acc[i], 1.0 + e, 2e-7) << "n " << n << " i " << i;
      EXPECT_NEAR(over[i], e, 2e-7) << "n " << n << " i " << i;
      const double m = std::exp(static_cast<double>(row[i]) - shifts[i]);
      EXPECT_NEAR(minus[i], m, 2e-6 * m) << "n " << n << " i " << i;
    }
  }
}

TEST(VectorMathTest, ActivationsStayFiniteAtTheEndsOfTheRange) {
  if (std::string(VectorMathName()) == "scalar") {
    GTEST_SKIP() << "built without Highway: the scalar fallback clamps its exp at "
                    "±88 and is not held to the ends of the range";
  }
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> in = {-big, -1e30f, -200.0f, -90.0f, -0.0f, 0.0f,
                                 90.0f,  200.0f, 1e30f,   big,    1e-30f};
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<float> gelu(in.size()), silu(in.size()), swiglu(in.size());
  GeluForward(in.data(), gelu.data(), n);
  SiluForward(in.data(), silu.data(), n);
  SwiGluForward(in.data(), std::vector<float>(in.size(), 1.0f).data(), swiglu.data(), n);
  std::vector<float> g_gelu(in.size(), 0.0f), g_silu(in.size(), 0.0f);
  const std::vector<float> ones(in.size(), 1.0f);
  GeluBackward(in.data(), ones.data(), g_gelu.data(), n);
  SiluBackward(in.data(), ones.data(), g_silu.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    // Large negative inputs give 0, large positive ones the input itself.
    const float expected = x < -100 ? 0.0f : x > 100 ? x : gelu[i];
    EXPECT_EQ(gelu[i], expected) << "x " << x;
    EXPECT_EQ(silu[i], x < -100 ? 0.0f : x > 100 ? x : silu[i]) << "x " << x;
    EXPECT_EQ(swiglu[i], silu[i]) << "x " << x;
    EXPECT_TRUE(std::isfinite(g_gelu[i]) || std::abs(x) > 1e18f) << "x " << x;
    EXPECT_TRUE(std::isfinite(g_silu[i]) || std::abs(x) > 1e18f) << "x " << x;
    if (std::abs(x) >= 90 && std::abs(x) < 1e18f) {
      EXPECT_NEAR(g_gelu[i], x > 0 ? 1.0f : 0.0f, 1e-6) << "x " << x;
      EXPECT_NEAR(g_silu[i], x > 0 ? 1.0f : 0.0f, 1e-6) << "x " << x;
    }
  }
  EXPECT_NEAR(gelu[10], 0.5e-30f, 1e-36f);
}

// Highway 1.0.3's Exp for floats, one lane, in its own order of operations
// (hwy/contrib/math/math-inl.h: Exp, ExpImpl<float>), each MulAdd fused.
float HighwayExp(float x) {
  const float half = std::copysign(0.5f, x);
  const auto q = static_cast<int32_t>(std::fma(x, 1.442695040888963407359924681f, half));
  const float qf = static_cast<float>(q);
  float r = std::fma(qf, -0.693145751953125f, x);
  r = std::fma(qf, -1.428606765330187045e-6f, r);
  const float r2 = r * r, r4 = r2 * r2;
  const float est =
      std::fma(r4, std::fma(0.000198527617612853646278381f, r, 0.00139304355252534151077271f),
               std::fma(r2, std::fma(0.00833336077630519866943359f, r,
                                     0.0416664853692054748535156f),
                        std::fma(0.166666671633720397949219f, r, 0.5f)));
  const float p = std::fma(est, r2, r) + 1.0f;
  const auto pow2 = [](int32_t e) { return std::bit_cast<float>((e + 0x7F) << 23); };
  const int32_t y = q >> 1;
  const float value = p * pow2(y) * pow2(q - y);
  return x >= -104.0f ? value : 0.0f;
}

// On AVX-512 the exponential is engine/cpu/vector_math_highway.cc's
// FastExp, which claims Highway's Exp bit for bit: every float the
// softmaxes, GELU and SiLU feed it, and the ends, give the same bits.
TEST(VectorMathTest, AvxExpIsHighwaysBitForBit) {
  if (std::string(VectorMathName()).find("AVX3") == std::string::npos) {
    GTEST_SKIP() << "vector math is " << VectorMathName()
                 << ": the AVX-512 exponential is not built";
  }
  std::vector<float> in = {-0.0f, 0.0f, -104.0f, -103.99999f, -104.00001f, -87.33654f,
                           -std::numeric_limits<float>::infinity(), -1e-45f, -1e-30f,
                           -0.34657359f, 0.34657359f, -149 * 0.6931472f, -126.5f * 0.6931472f,
                           88.0f, 1e-30f, -150.0f, -1e30f};
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    const double scale = i % 3 == 0 ? 40.0 : i % 3 == 1 ? 2.0 : 0.1;
    in.push_back(static_cast<float>(-std::abs(scale * rng.Normal())));
  }
  for (int i = 0; i < 1000; ++i) in.push_back(static_cast<float>(40.0 * rng.Normal()));
  const int64_t n = static_cast<int64_t>(in.size());
  const std::vector<float> zeros(in.size(), 0.0f);
  std::vector<float> out(in.size());
  ExpMinus(in.data(), zeros.data(), out.data(), n);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float expected = HighwayExp(in[i]);
    if (std::memcmp(&out[i], &expected, sizeof(float)) != 0 && ++differ <= 5) {
      ADD_FAILURE() << "exp(" << in[i] << "): " << out[i] << ", Highway's " << expected;
    }
  }
  EXPECT_EQ(differ, 0) << "of " << n;
}

}  // namespace
}  // namespace smallem::cpu
