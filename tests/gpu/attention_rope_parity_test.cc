// CPU/CUDA parity of rope (in place too) and of causal attention, forward
// and backward, for every head size the kernels take, in both matmul
// precisions and with f32 or bf16 activations.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::ActivationParityTest;
using testing::Bf16ActivationOpsTest;
using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::StorageMix;
using testing::kAttentionTolerance;
using testing::kBf16Tolerance;
using testing::kCpu;
using testing::kElementwiseMixes;
using testing::kF32Tolerance;
using testing::kGpu;
using testing::kRopeShape;

TEST_F(OpParityTest, RopeForwardInPlaceAndBackward) {
  Pair x = Random(kRopeShape), out = Random(kRopeShape), in_place = Random(kRopeShape);
  Pair g = Random(kRopeShape), gx = Random(kRopeShape);
  RopeBoth(x, out, in_place, g, gx);
  ExpectClose(out, kF32Tolerance, "rope");
  ExpectClose(in_place, kF32Tolerance, "rope in place");
  ExpectClose(gx, kF32Tolerance, "rope backward");
  RopeBoth(x, out, in_place, g, gx, /*overwrite=*/true);  // gx's values are not read
  ExpectClose(gx, kF32Tolerance, "rope backward, overwritten");
}

TEST_F(Bf16ActivationOpsTest, RopeMatchesTheCpu) {
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair x = RandomStored(kRopeShape, mix.in), out = RandomStored(kRopeShape, mix.out);
    Pair in_place = RandomStored(kRopeShape, kBf16);
    Pair g = RandomStored(kRopeShape, mix.in), gx = RandomStored(kRopeShape, mix.out);
    RopeBoth(x, out, in_place, g, gx);
    const std::string what = mix.Name();
    ExpectCloseAct(out, "rope, " + what);
    ExpectCloseAct(in_place, "rope in place, bf16");
    ExpectCloseAct(gx, "rope backward, " + what);
  }
}

// ----------------------------------------------------------- attention

// Attention forward and backward on both backends, for head size
// GetParam(), in either matmul precision and with the activations (qkv,
// out, grad_out, grad_qkv) stored as f32 or bf16. Both backwards read the
// CPU's forward results, so that they are judged on identical inputs;
// gradients start from random values, so += is checked too.
//
// Tolerances: kF32 (attention.cu) matches to rounding (f32 1e-5, grad_qkv
// 2e-5 since its sums cancel: Σ_j dS_j = 0); kBf16 (attention_bf16.cu, the
// tensor cores) as the bf16 matmuls (ExpectCloseBf16), with the gradient's
// increments compared when it is f32. A bf16-stored result adds one bf16
// ulp (kBf16StorageUlp) on both; a bf16 grad_qkv is compared as stored
// (start + increment, rounded), since its increment alone carries the
// rounding of the start.
class AttentionParityTest : public ActivationParityTest,
                            public ::testing::WithParamInterface<int64_t> {
 protected:
  // The backward writes grad_qkv (its random start unread) instead of adding.
  bool overwrite_ = false;

  void Check(MatmulPrecision precision, DType act) {
    const int64_t head_dim = GetParam();
    cuda_->set_matmul_precision(precision);
    const bool bf16_math = precision == MatmulPrecision::kBf16;
    for (auto [batch, time, heads] : {std::tuple<int64_t, int64_t, int64_t>{2, 37, 3},
                                      {1, 70, 2}, {3, 1, 1}, {1, 130, 1}}) {
      const int64_t c = heads * head_dim;
      Pair qkv = RandomStored({batch, time, 3 * c}, act);
      Pair out = RandomStored({batch, time, c}, act), lse = Random({batch, heads, time});
      const std::vector<float> start = Uniform(batch * time * 3 * c, -1, 1);
      Pair g = RandomStored({batch, time, c}, act);
      Pair g_qkv = Stored({batch, time, 3 * c}, start, act);
      Both([&](Backend& be, Side s) {
        be.AttentionForward({.qkv = qkv[s], .out = out[s], .lse = lse[s], .batch = batch,
                             .time = time, .heads = heads, .head_dim = head_dim});
      });
      Pair ref_out = Stored({batch, time, c}, ReadStored(kCpu, out[kCpu]), act);
      Pair ref_lse = F32({batch, heads, time}, Read(kCpu, lse[kCpu]));
      Both([&](Backend& be, Side s) {
        be.AttentionBackward({.qkv = qkv[s], .out = ref_out[s], .lse = ref_lse[s],
                              .grad_out = g[s], .grad_qkv = g_qkv[s], .batch = batch,
                              .time = time, .heads = heads, .head_dim = head_dim,
                              .overwrite = overwrite_});
      });
      const std::string what = std::string(bf16_math ? "bf16" : "f32") + " attention (" +
                               DTypeName(act) + " activations) B=" + std::to_string(batch) +
                               " T=" + std::to_string(time) + " H=" + std::to_string(heads) +
                               " D=" + std::to_string(head_dim);
      ExpectCloseInPrecision(out, kF32Tolerance, what + " out");
      if (bf16_math && act == DType::kF32) {
        // Increments: what the backward added to the random start.
        std::vector<float> cpu_inc = Read(kCpu, g_qkv[kCpu]), gpu_inc = Read(kGpu, g_qkv[kGpu]);
        for (size_t i = 0; i < start.size(); ++i) {
          cpu_inc[i] -= start[i];
          gpu_inc[i] -= start[i];
        }
        Pair increments = F32({batch, time, 3 * c}, cpu_inc);
        gpu_->CopyToDevice(increments[kGpu].data, gpu_inc.data(), increments[kGpu].bytes());
        ExpectCloseBf16(increments, what + " grad_qkv increments");
      } else {
        ExpectCloseInPrecision(g_qkv, kAttentionTolerance, what + " grad_qkv");
      }
      // lse is f32 on both sides.
      if (!bf16_math) {
        ExpectClose(lse, kF32Tolerance, what + " lse");
        continue;
      }
      // With bf16 math lse carries the scores' absolute error (bf16 q·k),
      // which is relative to |q||k|, not to lse: with T = 1, lse is one
      // score and may be near 0.
      const std::vector<float> want = Read(kCpu, lse[kCpu]), got = Read(kGpu, lse[kGpu]);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(std::fabs(got[i] - want[i]), kBf16Tolerance * (1.0f + std::fabs(want[i])))
            << what << " lse at " << i << ": cpu " << want[i] << ", cuda " << got[i];
      }
    }
  }
};

TEST_P(AttentionParityTest, ForwardAndBackwardMatchCpu) {
  Check(MatmulPrecision::kF32, DType::kF32);
}

TEST_P(AttentionParityTest, Bf16StorageMatchesCpu) {
  Check(MatmulPrecision::kF32, DType::kBF16);
}

TEST_P(AttentionParityTest, OverwrittenGradientMatchesCpu) {
  overwrite_ = true;
  Check(MatmulPrecision::kF32, DType::kF32);
  Check(MatmulPrecision::kF32, DType::kBF16);
}

// "D64": the head size, in the test's name.
std::string HeadSizeName(const ::testing::TestParamInfo<int64_t>& info) {
  return "D" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, AttentionParityTest, ::testing::Values(32, 64, 128),
                         HeadSizeName);

// The tensor-core attention of the bf16 mode (kernels/attention_bf16.cu).
class Bf16AttentionParityTest : public AttentionParityTest {};

TEST_P(Bf16AttentionParityTest, ForwardAndBackwardAreCloseToTheCpu) {
  Check(MatmulPrecision::kBf16, DType::kF32);
}

TEST_P(Bf16AttentionParityTest, Bf16StorageIsCloseToTheCpu) {
  Check(MatmulPrecision::kBf16, DType::kBF16);
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, Bf16AttentionParityTest, ::testing::Values(32, 64, 128),
                         HeadSizeName);

}  // namespace
}  // namespace smallem
