// Newton–Schulz schedules and the batched orthogonalization: the muon:short
// table is what the minimax derivation gives, each schedule acts on known
// singular values as its scalar composite, tall equals wide transposed, and
// stacking changes no number.
#include "engine/optim/newton_schulz.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

using Matrix = std::vector<double>;  // row-major

// A random n × n orthogonal matrix: Gram–Schmidt on Gaussian columns.
Matrix RandomOrthogonal(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Matrix q(n * n);
  for (double& x : q) x = normal(rng);
  for (int64_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += q[i * n + j] * q[i * n + k];
        for (int64_t i = 0; i < n; ++i) q[i * n + j] -= dot * q[i * n + k];
      }
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += q[i * n + j] * q[i * n + j];
    for (int64_t i = 0; i < n; ++i) q[i * n + j] /= std::sqrt(norm);
  }
  return q;
}

// U·diag(s)·Vᵀ with the first s.size() columns of U (rows × rows) and V
// (cols × cols).
Matrix Compose(const Matrix& u, const std::vector<double>& s, const Matrix& v, int64_t rows,
               int64_t cols) {
  Matrix m(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (size_t k = 0; k < s.size(); ++k) sum += u[i * rows + k] * s[k] * v[j * cols + k];
      m[i * cols + j] = sum;
    }
  }
  return m;
}

class NewtonSchulzTest : public ::testing::Test {
 protected:
  NewtonSchulzTest() : be_(TestCpuOptions(2)), serial_(TestCpuOptions(1)), tensors_(be_) {}

  Tensor Alloc(Shape shape) { return tensors_.Allocate(shape); }

  // Orthogonalizes `batch` stacked (rows, cols) matrices given as doubles.
  // Runs on `backend` (default: the 2-thread one); memory is host memory
  // either way.
  std::vector<float> Run(const std::vector<float>& in, int64_t batch, int64_t rows, int64_t cols,
                         const NewtonSchulzSchedule& schedule, Backend* backend = nullptr) {
    Tensor x = Alloc({batch, rows, cols});
    std::copy(in.begin(), in.end(), x.f32());
    Tensor ws = Alloc({NewtonSchulzWorkspaceFloats(batch, rows, cols)});
    Orthogonalize(backend ? *backend : be_, x, schedule, CarveNewtonSchulzWorkspace(ws.f32(), batch, rows, cols));
    return std::vector<float>(x.f32(), x.f32() + x.numel());
  }

  CpuBackend be_;
  CpuBackend serial_;
  testing::BackendTensors tensors_;
};

std::vector<float> ToFloat(const Matrix& m) { return std::vector<float>(m.begin(), m.end()); }

TEST(NewtonSchulzScheduleTest, StandardScheduleIsEightThenTwo) {
  const NewtonSchulzSchedule& s = StandardNewtonSchulzSchedule();
  ASSERT_EQ(s.size(), 10u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(s[i].a, 3.4445);
    EXPECT_EQ(s[i].b, -4.7750);
    EXPECT_EQ(s[i].c, 2.0315);
  }
  for (int i = 8; i < 10; ++i) {
    EXPECT_EQ(s[i].a, 2.0);
    EXPECT_EQ(s[i].b, -1.5);
    EXPECT_EQ(s[i].c, 0.5);
  }
}

TEST(NewtonSchulzScheduleTest, MinimaxDerivationReproducesTheShortTable) {
  const MinimaxSchedule derived = DeriveMinimaxSchedule(kShortScheduleLower, 4);
  // The table as derived, before its norm margin is folded into step 1.
  const NewtonSchulzSchedule table =
      WithNormMargin(ShortNewtonSchulzSchedule(), 1 / kShortNormMargin);
  ASSERT_EQ(derived.steps.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_NEAR(derived.steps[i].a, table[i].a, 1e-8 * std::abs(table[i].a)) << "iteration " << i;
    EXPECT_NEAR(derived.steps[i].b, table[i].b, 1e-8 * std::abs(table[i].b)) << "iteration " << i;
    EXPECT_NEAR(derived.steps[i].c, table[i].c, 1e-8 * std::abs(table[i].c)) << "iteration " << i;
  }
  // The stated band contains the derived one and is no looser than needed.
  EXPECT_GE(derived.band_low, kShortBandLow);
  EXPECT_LE(derived.band_high, kShortBandHigh);
  EXPECT_LT(derived.band_low, kShortBandLow + 1e-5);
  EXPECT_GT(derived.band_high, kShortBandHigh - 1e-5);
}

TEST(NewtonSchulzScheduleTest, ShortScheduleHoldsItsBandFromTwoPercentToTheMargin) {
  const NewtonSchulzSchedule& s = ShortNewtonSchulzSchedule();
  // σ/‖X‖_F from 2 % of the normalization (1.01·‖X‖_F) up to 1.01.
  const double low = kShortScheduleLower * kShortNormMargin, high = kShortNormMargin;
  double lo = 2, hi = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double x = low + (high - low) * i / 200000.0;
    lo = std::min(lo, ApplySchedule(s, x));
    hi = std::max(hi, ApplySchedule(s, x));
  }
  EXPECT_GE(lo, kShortBandLow);
  EXPECT_LE(hi, kShortBandHigh);
  // Below that the composite rises monotonically from 0: small directions
  // grow but never overshoot.
  double previous = 0;
  for (int i = 1; i <= 2000; ++i) {
    const double y = ApplySchedule(s, low * i / 2000.0);
    EXPECT_GE(y, previous);
    EXPECT_LE(y, kShortBandHigh);
    previous = y;
  }
}

// Frobenius normalization puts σ ≤ 1 in exact arithmetic, but a rounded norm
// (f32 sums, bf16 products) can leave the top singular value just above it.
// Without a margin the short table, tuned to [0.02, 1], sends 1 + 1e-3 to
// 2.77 and 1 + 5e-3 to 1e7; with it both stay in the band.
TEST(NewtonSchulzScheduleTest, ShortScheduleSurvivesASingularValueJustAboveTheNorm) {
  const NewtonSchulzSchedule bare =
      WithNormMargin(ShortNewtonSchulzSchedule(), 1 / kShortNormMargin);
  EXPECT_GT(ApplySchedule(bare, 1 + 1e-3), 2.0);
  EXPECT_GT(ApplySchedule(bare, 1 + 5e-3), 1e6);
  for (double sigma : {1.0, 1 + 1e-3, 1 + 5e-3, 1 + 1e-2}) {
    const double y = ApplySchedule(ShortNewtonSchulzSchedule(), sigma);
    EXPECT_GE(y, kShortBandLow) << sigma;
    EXPECT_LE(y, kShortBandHigh) << sigma;
  }
}

TEST(NewtonSchulzScheduleTest, NormMarginScalesTheFirstStepOnly) {
  const NewtonSchulzSchedule& s = StandardNewtonSchulzSchedule();
  const NewtonSchulzSchedule m = WithNormMargin(s, 1.25);
  for (double x : {0.01, 0.3, 0.9, 1.2}) {
    EXPECT_NEAR(ApplySchedule(m, x), ApplySchedule(s, x / 1.25), 1e-12) << x;
  }
  for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(m[i].a, s[i].a);
}

TEST(NewtonSchulzScheduleTest, DerivationIsDeterministic) {
  const MinimaxSchedule a = DeriveMinimaxSchedule(0.02, 4), b = DeriveMinimaxSchedule(0.02, 4);
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].a, b.steps[i].a);
    EXPECT_EQ(a.steps[i].b, b.steps[i].b);
    EXPECT_EQ(a.steps[i].c, b.steps[i].c);
  }
}

// U·diag(s)·Vᵀ goes to U·diag(f(s / ‖s‖))·Vᵀ, f the scalar composite.
TEST_F(NewtonSchulzTest, EachScheduleActsOnKnownSingularValuesAsItsScalarComposite) {
  struct Case {
    const NewtonSchulzSchedule* schedule;
    const char* name;
  };
  for (const Case& c : {Case{&StandardNewtonSchulzSchedule(), "muon"},
                        Case{&ShortNewtonSchulzSchedule(), "muon:short"}}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{12, 12}, {8, 20}, {20, 8}}) {
      std::mt19937_64 rng(rows * 100 + cols);
      const Matrix u = RandomOrthogonal(rows, rng), v = RandomOrthogonal(cols, rng);
      const int64_t k = std::min(rows, cols);
      std::vector<double> s(k);
      for (int64_t i = 0; i < k; ++i) s[i] = 3.7 * std::pow(0.05, static_cast<double>(i) / (k - 1));
      double frob = 0;
      for (double x : s) frob += x * x;
      frob = std::sqrt(frob);
      std::vector<double> f(k);
      for (int64_t i = 0; i < k; ++i) f[i] = ApplySchedule(*c.schedule, s[i] / frob);
      const Matrix expected = Compose(u, f, v, rows, cols);
      const std::vector<float> got = Run(ToFloat(Compose(u, s, v, rows, cols)), 1, rows, cols,
                                         *c.schedule);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
      EXPECT_LT(worst, 2e-6) << c.name << " on " << rows << "x" << cols;
    }
  }
}

TEST_F(NewtonSchulzTest, ShortScheduleBringsEverySingularValueFromTwoPercentIntoTheBand) {
  const int64_t rows = 32, cols = 48;
  std::mt19937_64 rng(7);
  const Matrix u = RandomOrthogonal(rows, rng), v = RandomOrthogonal(cols, rng);
  // 32 singular values whose share of the Frobenius norm runs from exactly
  // 2 % of the normalization 1.01·‖X‖_F (two of them) through 10 % up to
  // one dominant value near 96 %.
  const double low = kShortScheduleLower * kShortNormMargin;
  std::vector<double> s(rows);
  double rest = 0;
  s[0] = low;
  for (int64_t i = 1; i < rows - 1; ++i) {
    s[i] = low * std::pow(5.0, static_cast<double>(i - 1) / (rows - 3));
  }
  for (int64_t i = 0; i < rows - 1; ++i) rest += s[i] * s[i];
  s[rows - 1] = std::sqrt(1 - rest);
  for (double& x : s) x *= 5.0;  // any scale: the iteration normalizes first
  const std::vector<float> got =
      Run(ToFloat(Compose(u, s, v, rows, cols)), 1, rows, cols, ShortNewtonSchulzSchedule());
  // Uᵀ·O·V is diagonal with O's singular values on it.
  double lo = 2, hi = 0, off = 0;
  for (int64_t a = 0; a < rows; ++a) {
    for (int64_t b = 0; b < rows; ++b) {
      double sum = 0;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) sum += u[i * rows + a] * got[i * cols + j] * v[j * cols + b];
      }
      if (a == b) {
        lo = std::min(lo, sum);
        hi = std::max(hi, sum);
      } else {
        off = std::max(off, std::abs(sum));
      }
    }
  }
  // The band of the table, widened by f32 rounding (measured: 2e-7).
  EXPECT_GE(lo, kShortBandLow - 1e-5);
  EXPECT_LE(hi, kShortBandHigh + 1e-5);
  EXPECT_LT(off, 1e-5);
}

TEST_F(NewtonSchulzTest, TallEqualsTheTransposeOfWide) {
  const int64_t rows = 24, cols = 10;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> tall(rows * cols), wide(rows * cols);
  for (float& x : tall) x = normal(rng);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) wide[j * rows + i] = tall[i * cols + j];
  }
  for (const NewtonSchulzSchedule* schedule :
       {&StandardNewtonSchulzSchedule(), &ShortNewtonSchulzSchedule()}) {
    const std::vector<float> a = Run(tall, 1, rows, cols, *schedule);
    const std::vector<float> b = Run(wide, 1, cols, rows, *schedule);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        EXPECT_NEAR(a[i * cols + j], b[j * rows + i], 1e-5) << i << "," << j;
      }
    }
  }
}

// Exact equality needs a backend that computes each product of a batch as
// it would alone: the 1-thread CPU backend. With more threads a lone product
// is cut into row slabs (matmul.cc), which may move the last bit.
TEST_F(NewtonSchulzTest, StackedMatricesGetExactlyTheNumbersTheyGetAlone) {
  const int64_t batch = 3, rows = 64, cols = 96;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> stack(batch * rows * cols);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < rows * cols; ++i) stack[b * rows * cols + i] = (b + 1) * normal(rng);
  }
  for (const NewtonSchulzSchedule* schedule :
       {&StandardNewtonSchulzSchedule(), &ShortNewtonSchulzSchedule()}) {
    const std::vector<float> together = Run(stack, batch, rows, cols, *schedule, &serial_);
    const std::vector<float> threaded = Run(stack, batch, rows, cols, *schedule);
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<float> one(stack.begin() + b * rows * cols,
                                   stack.begin() + (b + 1) * rows * cols);
      const std::vector<float> alone = Run(one, 1, rows, cols, *schedule, &serial_);
      const std::vector<float> alone_threaded = Run(one, 1, rows, cols, *schedule);
      for (int64_t i = 0; i < rows * cols; ++i) {
        ASSERT_EQ(together[b * rows * cols + i], alone[i]) << "matrix " << b << " element " << i;
        ASSERT_NEAR(threaded[b * rows * cols + i], alone_threaded[i], 1e-6)
            << "matrix " << b << " element " << i;
      }
    }
  }
}

TEST_F(NewtonSchulzTest, ZeroMatrixStaysZero) {
  const std::vector<float> got =
      Run(std::vector<float>(6 * 4, 0.0f), 1, 6, 4, StandardNewtonSchulzSchedule());
  for (float x : got) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace smallem
