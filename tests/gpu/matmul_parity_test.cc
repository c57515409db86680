// CPU/CUDA parity of Matmul: every transpose and beta, odd and larger
// shapes, an empty inner dimension, strided and broadcast batches, and every
// mix of f32 and bf16 storage, in both matmul precisions (the bf16
// precision's cases are named Bf16…).
#include <cstdint>
#include <string>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::ActivationParityTest;
using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::kF32Tolerance;

struct MatmulCase {
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  float alpha, beta;
  // Operand storage, and extra elements between batch items (a strided
  // batch when > 0).
  DType a_type = DType::kF32, b_type = DType::kF32, out_type = DType::kF32;
  int64_t gap = 0;
};

class MatmulParityTest : public ActivationParityTest {
 protected:
  // Runs one batched product on both backends and compares; out starts
  // random so beta ≠ 0 accumulates into something, and the gaps between
  // items must come back untouched.
  void Check(const MatmulCase& c) {
    const int64_t stride_a = c.m * c.k + c.gap, stride_b = c.k * c.n + c.gap;
    const int64_t stride_out = c.m * c.n + c.gap;
    Pair a = RandomStored({c.batch, stride_a}, c.a_type);
    Pair b = RandomStored({c.batch, stride_b}, c.b_type);
    Pair out = RandomStored({c.batch, stride_out}, c.out_type);
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = b[s], .out = out[s], .m = c.m, .n = c.n,
                             .k = c.k, .trans_a = c.trans_a, .trans_b = c.trans_b,
                             .batch = c.batch, .stride_a = stride_a,
                             .stride_b = stride_b, .stride_out = stride_out,
                             .alpha = c.alpha, .beta = c.beta});
    });
    const std::string what = "matmul m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                             " k=" + std::to_string(c.k) + " batch=" + std::to_string(c.batch) +
                             " trans_a=" + std::to_string(c.trans_a) +
                             " trans_b=" + std::to_string(c.trans_b) +
                             " beta=" + std::to_string(c.beta) + " types " +
                             DTypeName(c.a_type) + "·" + DTypeName(c.b_type) + "→" +
                             DTypeName(c.out_type) + " gap=" + std::to_string(c.gap);
    ExpectCloseInPrecision(out, kF32Tolerance, what);
  }
};

TEST_F(MatmulParityTest, F32MatchesCpuForEveryTransposeAndBeta) {
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        Check({5, 7, 11, 3, trans_a, trans_b, 0.75f, beta});
        Check({37, 13, 1, 1, trans_a, trans_b, 1.0f, beta});
      }
    }
  }
}

TEST_F(MatmulParityTest, F32MatchesCpuOnLargerOddShapes) {
  Check({129, 65, 257, 2, false, true, 1.0f, 0.0f});
  Check({96, 200, 64, 1, true, false, 1.0f, 1.0f});
}

TEST_F(MatmulParityTest, Bf16IsCloseToTheF32Reference) {
  cuda_->set_matmul_precision(MatmulPrecision::kBf16);
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      Check({5, 7, 11, 3, trans_a, trans_b, 1.0f, 0.0f});
      Check({64, 96, 256, 2, trans_a, trans_b, 1.0f, 1.0f});
    }
  }
  Check({512, 1368, 512, 1, false, true, 1.0f, 0.0f});
}

TEST_F(MatmulParityTest, EmptyInnerDimensionScalesOut) {
  Check({5, 7, 0, 2, false, false, 1.0f, 0.5f});
  Check({5, 7, 0, 1, false, false, 1.0f, 0.0f});
}

// Every mix of f32 and bf16 storage in both precisions: kF32 must compute
// true f32 math on the bf16 values (widened) and round a bf16 out once;
// kBf16 multiplies bf16 operands as they are and writes a bf16 out
// directly. beta = 1 accumulates into a bf16 out; odd shapes fall back to
// f32 in kBf16.
TEST_F(MatmulParityTest, Bf16StorageMatchesCpuInBothPrecisions) {
  constexpr DType f = DType::kF32, h = DType::kBF16;
  const DType mixes[][3] = {{h, h, h}, {f, h, h}, {h, f, f}, {h, h, f}, {f, f, h}};
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    for (const auto& [a, b, out] : mixes) {
      Check({5, 7, 11, 3, false, false, 1.0f, 0.0f, a, b, out});
      Check({5, 7, 11, 3, true, true, 0.75f, 1.0f, a, b, out});
      Check({37, 13, 1, 1, true, false, 1.0f, -0.5f, a, b, out});
      Check({64, 96, 256, 2, false, true, 1.0f, 1.0f, a, b, out, 8});
      Check({128, 64, 96, 3, true, false, 1.0f, 0.0f, a, b, out, 24});
      Check({5, 7, 0, 2, false, false, 1.0f, 0.5f, a, b, out});
    }
  }
}

// A broadcast operand with bf16 storage: b shared (one taller product) and
// a shared (item by item, offsets in bf16 elements).
TEST_F(MatmulParityTest, Bf16StorageBroadcastsAZeroStrideOperand) {
  const int64_t m = 16, n = 24, k = 32, batch = 3;
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    Pair a = RandomStored({batch, m * k}, DType::kBF16);
    Pair w = RandomStored({k, n}, DType::kBF16);
    Pair out_b = RandomStored({batch, m * n}, DType::kBF16);
    Pair a1 = RandomStored({m, k}, DType::kBF16);
    Pair b = RandomStored({batch, k * n}, DType::kBF16);
    Pair out_a = RandomStored({batch, m * n}, DType::kBF16);
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = w[s], .out = out_b[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = m * k, .stride_b = 0,
                             .stride_out = m * n, .beta = 1.0f});
      be.Matmul(MatmulParams{.a = a1[s], .b = b[s], .out = out_a[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = 0, .stride_b = k * n,
                             .stride_out = m * n});
    });
    ExpectCloseInPrecision(out_b, kF32Tolerance, "bf16 matmul with b broadcast");
    ExpectCloseInPrecision(out_a, kF32Tolerance, "bf16 matmul with a broadcast");
  }
}

TEST_F(OpParityTest, MatmulBroadcastsAZeroStrideOperand) {
  const int64_t m = 5, n = 7, k = 11, batch = 3;
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    // Shared b (folds into one taller product) and shared a (item by item).
    Pair a = Random({batch, m * k});
    Pair w = Random({k, n});
    Pair out_b = Random({batch, m * n});
    Pair a1 = Random({m, k});
    Pair b = Random({batch, k * n});
    Pair out_a = Random({batch, m * n});
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = w[s], .out = out_b[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = m * k, .stride_b = 0,
                             .stride_out = m * n, .beta = 1.0f});
      be.Matmul(MatmulParams{.a = a1[s], .b = b[s], .out = out_a[s], .m = m, .n = n, .k = k,
                             .trans_b = false, .batch = batch, .stride_a = 0,
                             .stride_b = k * n, .stride_out = m * n});
    });
    if (precision == MatmulPrecision::kF32) {
      ExpectClose(out_b, kF32Tolerance, "matmul with b broadcast");
      ExpectClose(out_a, kF32Tolerance, "matmul with a broadcast");
    } else {
      ExpectCloseBf16(out_b, "matmul with b broadcast (bf16)");
      ExpectCloseBf16(out_a, "matmul with a broadcast (bf16)");
    }
  }
}

}  // namespace
}  // namespace smallem
