// CPU/CUDA parity of the reductions and the optimizer ops: Sum, SumSquares,
// AdamW (with and without clipping, its step scalars read on the device),
// the row ops, and Muon's stacked Newton–Schulz orthogonalization as one
// batched product per step.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/optim/newton_schulz.h"
#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::kCpu;
using testing::kF32Tolerance;
using testing::kGpu;

// ---------------------------------------------------------- reductions

TEST_F(OpParityTest, SumAndSumSquares) {
  for (int64_t count : {int64_t{1}, int64_t{385}, int64_t{1000003}}) {
    Pair in = Positive({count}, 0.0f, 1.0f);
    Pair sum = Random({1}), squares = Random({1}), accumulated = Random({1});
    Both([&](Backend& be, Side s) {
      be.Sum({.in = in[s], .out = sum[s]});
      be.SumSquares({.in = in[s], .out = squares[s]});
      be.SumSquares({.in = in[s], .out = accumulated[s], .accumulate = true});
    });
    const std::string n = std::to_string(count);
    ExpectClose(sum, kF32Tolerance, "sum of " + n);
    ExpectClose(squares, kF32Tolerance, "sum of squares of " + n);
    ExpectClose(accumulated, kF32Tolerance, "accumulated sum of squares of " + n);
  }
}

TEST_F(OpParityTest, AdamWWithAndWithoutClipping) {
  const Shape shape{5, 7, 11};
  // max_grad_norm 0.5 against a norm of 2: clipping scales by 0.25.
  for (float max_grad_norm : {0.0f, 0.5f, 10.0f}) {
    Pair param = Random(shape), grad = Random(shape);
    Pair m = Random(shape, 0.1f), v = Positive(shape, 0.0f, 0.01f);
    Pair norm_sq = F32({1}, {4.0f});
    Both([&](Backend& be, Side s) {
      for (int64_t step = 3; step <= 4; ++step) {
        be.AdamW({.param = param[s], .grad = grad[s], .m = m[s], .v = v[s],
                  .grad_norm_sq = norm_sq[s], .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                  .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = max_grad_norm,
                  .step = step});
      }
    });
    const std::string what = "adamw max_grad_norm=" + std::to_string(max_grad_norm);
    ExpectClose(param, kF32Tolerance, what + " param");
    ExpectClose(m, kF32Tolerance, what + " m");
    ExpectClose(v, kF32Tolerance, what + " v");
  }
}

TEST_F(OpParityTest, AdamWReadsItsStepScalarsOnTheDevice) {
  const Shape shape{5, 7, 11};
  Pair param = Random(shape), grad = Random(shape);
  Pair m = Random(shape, 0.1f), v = Positive(shape, 0.0f, 0.01f);
  Pair norm_sq = F32({1}, {4.0f});
  // The GPU's argument path, on copies of the same state.
  Pair param2 = F32(shape, Read(kGpu, param[kGpu])), m2 = F32(shape, Read(kGpu, m[kGpu]));
  Pair v2 = F32(shape, Read(kGpu, v[kGpu]));
  for (int64_t step = 1; step <= 3; ++step) {
    const AdamWStepScalars scalars = MakeAdamWStepScalars(1e-2f, 0.9f, 0.95f, step);
    Pair device_scalars = F32({3}, {scalars.lr, scalars.correction1, scalars.correction2});
    Both([&](Backend& be, Side s) {
      be.AdamW({.param = param[s], .grad = grad[s], .m = m[s], .v = v[s],
                .grad_norm_sq = norm_sq[s], .scalars = device_scalars[s], .beta1 = 0.9f,
                .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = 0.5f});
    });
    gpu_->AdamW({.param = param2[kGpu], .grad = grad[kGpu], .m = m2[kGpu], .v = v2[kGpu],
                 .grad_norm_sq = norm_sq[kGpu], .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                 .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = 0.5f, .step = step});
  }
  ExpectClose(param, kF32Tolerance, "adamw from device scalars: param");
  ExpectClose(m, kF32Tolerance, "adamw from device scalars: m");
  ExpectClose(v, kF32Tolerance, "adamw from device scalars: v");
  EXPECT_TRUE(Bytes(param[kGpu]) == Bytes(param2[kGpu]))
      << "device scalars and arguments must give the same bits";
  EXPECT_TRUE(Bytes(v[kGpu]) == Bytes(v2[kGpu]));
}

// ------------------------------------------------- optimizer row ops

TEST_F(OpParityTest, RowSumSquaresMatchesTheCpu) {
  struct Case {
    Shape shape;
    float alpha, beta;
  };
  // (35, 11), one element, rows longer than a block's stride, many rows,
  // a vector (one row), accumulation into out.
  for (const Case& c : {Case{{5, 7, 11}, 1.0f, 0.0f}, Case{{1, 1}, 1.0f, 0.0f},
                        Case{{3, 100003}, 0.5f, 0.95f}, Case{{4096, 257}, 1.0f, 0.0f},
                        Case{{37}, -2.0f, 1.0f}, Case{{7, 300}, 0.05f / 300, 0.95f}}) {
    Pair in = Random(c.shape);
    Pair out = Positive({c.shape.rows()}, 0.5f, 1.0f);
    Both([&](Backend& be, Side s) {
      be.RowSumSquares({.in = in[s], .out = out[s], .alpha = c.alpha, .beta = c.beta});
    });
    ExpectClose(out, kF32Tolerance, "row_sum_squares " + c.shape.ToString() +
                                        " alpha=" + std::to_string(c.alpha) +
                                        " beta=" + std::to_string(c.beta));
  }
  // beta = 0 never reads out, even when it holds NaN.
  Pair in = Random({5, 9});
  Pair out = F32({5}, std::vector<float>(5, NAN));
  Both([&](Backend& be, Side s) { be.RowSumSquares({.in = in[s], .out = out[s]}); });
  ExpectClose(out, kF32Tolerance, "row_sum_squares over NaN");
}

TEST_F(OpParityTest, RowScaleMatchesTheCpu) {
  for (const Shape& shape : {Shape{5, 7, 11}, Shape{1, 1}, Shape{3, 100003}, Shape{513, 3}}) {
    const int64_t rows = shape.rows();
    Pair in = Random(shape);
    Pair numer = Positive({rows}, 0.0f, 4.0f), denom = Positive({rows}, 0.1f, 3.0f);
    Pair scale = F32({1}, {-0.0371f});
    Pair plain = Random(shape), both = Random(shape), scaled = Random(shape);
    Pair in_place = F32(shape, Read(kCpu, in[kCpu]));
    Both([&](Backend& be, Side s) {
      be.RowScale({.in = in[s], .out = plain[s], .alpha = 0.75f});
      be.RowScale({.in = in[s], .out = both[s], .numer = numer[s], .denom = denom[s],
                   .alpha = 1.5f, .eps = 1e-3f});
      be.RowScale({.in = in[s], .out = scaled[s], .denom = denom[s], .scale = scale[s],
                   .alpha = 0.5f});
      be.RowScale({.in = in_place[s], .out = in_place[s], .numer = numer[s], .alpha = 2.0f});
    });
    const std::string what = "row_scale " + shape.ToString();
    ExpectClose(plain, kF32Tolerance, what + " by alpha");
    ExpectClose(both, kF32Tolerance, what + " with numer, denom and eps");
    ExpectClose(scaled, kF32Tolerance, what + " with a device scale");
    ExpectClose(in_place, kF32Tolerance, what + " in place");
  }
  // Zero rows stay zero: a zero statistic gives a factor 0, not 0/0; a
  // negative numerator counts as 0.
  Pair zero = Zeros({4, 6}), stat = F32({4}, {0.0f, 0.0f, 1.0f, 4.0f});
  Pair numer = F32({4}, {1.0f, -1.0f, 1.0f, 1.0f});
  Pair out = Random({4, 6});
  Both([&](Backend& be, Side s) {
    be.RowScale({.in = zero[s], .out = out[s], .numer = numer[s], .denom = stat[s]});
  });
  for (float value : Read(kGpu, out[kGpu])) EXPECT_EQ(value, 0.0f);
}

TEST_F(OpParityTest, StackedOrthogonalizationIsOneBatchedProductPerStep) {
  // Three matrices of one shape, wide and tall: each Newton–Schulz
  // iteration is three Matmul calls for the whole stack, each one strided
  // batched cuBLASLt product (MatmulParams.batch = 3), whatever the stack
  // size; the result matches the CPU's.
  const NewtonSchulzSchedule& schedule = ShortNewtonSchulzSchedule();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{24, 40}, {40, 24}}) {
    const int64_t n = 3;
    Pair x = Random({n, rows, cols});
    Pair workspace = Zeros({NewtonSchulzWorkspaceFloats(n, rows, cols)});
    const int64_t launches = cuda_->matmul_launches();
    Both([&](Backend& be, Side s) {
      Orthogonalize(be, x[s], schedule,
                    CarveNewtonSchulzWorkspace(workspace[s].f32(), n, rows, cols));
    });
    EXPECT_EQ(cuda_->matmul_launches() - launches, 3 * static_cast<int64_t>(schedule.size()))
        << rows << "x" << cols;
    // Four polynomial steps amplify rounding differences a little.
    ExpectClose(x, 1e-4, "stacked orthogonalization " + std::to_string(rows) + "x" +
                             std::to_string(cols));
  }
}

}  // namespace
}  // namespace smallem
