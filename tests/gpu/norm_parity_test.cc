// CPU/CUDA parity of LayerNorm and RMSNorm, forward and backward, with and
// without the fused residual add: on f32 operands, then with the model's
// mixes of f32 and bf16 activations (Bf16ActivationOpsTest).
#include <cstdint>
#include <string>
#include <utility>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::Bf16ActivationOpsTest;
using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::kCpu;
using testing::kF32Tolerance;

TEST_F(OpParityTest, LayerNormForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
    // An offset mean makes the two-pass variance matter.
    Pair x = F32({rows, cols}, Uniform(rows * cols, 2.0f, 4.0f));
    Pair gain = Random({cols}), bias = Random({cols});
    Pair out = Random({rows, cols}), mean = Random({rows}), rstd = Random({rows});
    Pair g = Random({rows, cols}), gx = Random({rows, cols});
    Pair g_gain = Random({cols}), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = out[s],
                           .mean = mean[s], .rstd = rstd[s]});
      be.LayerNormBackward({.x = x[s], .gain = gain[s], .mean = mean[s], .rstd = rstd[s],
                            .grad_out = g[s], .grad_x = gx[s], .grad_gain = g_gain[s],
                            .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(out, kF32Tolerance, "layer_norm out " + shape);
    ExpectClose(mean, kF32Tolerance, "layer_norm mean " + shape);
    ExpectClose(rstd, kF32Tolerance, "layer_norm rstd " + shape);
    ExpectClose(gx, kF32Tolerance, "layer_norm grad_x " + shape);
    ExpectClose(g_gain, kF32Tolerance, "layer_norm grad_gain " + shape);
    ExpectClose(g_bias, kF32Tolerance, "layer_norm grad_bias " + shape);
  }
}

TEST_F(OpParityTest, RmsNormForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}}) {
    Pair x = Random({rows, cols}, 3.0f), gain = Random({cols});
    Pair out = Random({rows, cols}), rstd = Random({rows});
    Pair g = Random({rows, cols}), gx = Random({rows, cols}), g_gain = Random({cols});
    Pair g_gain_only = Random({cols});
    Both([&](Backend& be, Side s) {
      be.RmsNormForward({.x = x[s], .gain = gain[s], .out = out[s], .rstd = rstd[s]});
      be.RmsNormBackward({.x = x[s], .gain = gain[s], .rstd = rstd[s], .grad_out = g[s],
                          .grad_x = gx[s], .grad_gain = g_gain[s]});
      be.RmsNormBackward({.x = x[s], .gain = gain[s], .rstd = rstd[s], .grad_out = g[s],
                          .grad_gain = g_gain_only[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(out, kF32Tolerance, "rms_norm out " + shape);
    ExpectClose(rstd, kF32Tolerance, "rms_norm rstd " + shape);
    ExpectClose(gx, kF32Tolerance, "rms_norm grad_x " + shape);
    ExpectClose(g_gain, kF32Tolerance, "rms_norm grad_gain " + shape);
    ExpectClose(g_gain_only, kF32Tolerance, "rms_norm grad_gain alone " + shape);
  }
}

TEST_F(OpParityTest, NormsWithAResidualAddMatchTheCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
    Pair x = F32({rows, cols}, Uniform(rows * cols, 1.0f, 3.0f)), r = Random({rows, cols});
    Pair gain = Random({cols}), bias = Random({cols});
    Pair layer_sum = Random({rows, cols}), layer_out = Random({rows, cols});
    Pair mean = Random({rows}), layer_rstd = Random({rows});
    Pair rms_sum = Random({rows, cols}), rms_out = Random({rows, cols}), rms_rstd = Random({rows});
    // In place: the sum overwrites x (a copy of it, so both cases see one x).
    Pair in_place = F32({rows, cols}, Read(kCpu, x[kCpu])), in_place_out = Random({rows, cols});
    Both([&](Backend& be, Side s) {
      be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = layer_out[s],
                           .mean = mean[s], .rstd = layer_rstd[s], .residual = r[s],
                           .sum = layer_sum[s]});
      be.RmsNormForward({.x = x[s], .gain = gain[s], .out = rms_out[s], .rstd = rms_rstd[s],
                         .residual = r[s], .sum = rms_sum[s]});
      be.RmsNormForward({.x = in_place[s], .gain = gain[s], .out = in_place_out[s],
                         .residual = r[s], .sum = in_place[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(layer_sum, 0, "layer_norm sum " + shape);  // one f32 add: exact
    ExpectClose(layer_out, kF32Tolerance, "layer_norm out " + shape);
    ExpectClose(mean, kF32Tolerance, "layer_norm mean " + shape);
    ExpectClose(layer_rstd, kF32Tolerance, "layer_norm rstd " + shape);
    ExpectClose(rms_sum, 0, "rms_norm sum " + shape);
    ExpectClose(rms_out, kF32Tolerance, "rms_norm out " + shape);
    ExpectClose(rms_rstd, kF32Tolerance, "rms_norm rstd " + shape);
    ExpectClose(in_place, 0, "rms_norm sum in place " + shape);
    ExpectClose(in_place_out, kF32Tolerance, "rms_norm out in place " + shape);
  }
}

// The dtypes of a norm case: forward x, residual, sum and out; backward x,
// grad_out and grad_x.
struct NormMix {
  DType x, residual, sum, out;
  DType backward_x, grad_out, grad_x;
  std::string Name() const {
    return std::string("x ") + DTypeName(x) + ", residual " + DTypeName(residual) + ", sum " +
           DTypeName(sum) + ", out " + DTypeName(out) + "; backward x " +
           DTypeName(backward_x) + ", grad_out " + DTypeName(grad_out) + ", grad_x " +
           DTypeName(grad_x);
  }
};
// All bf16, then the model's mix: the residual stream (x, sum) in f32, the
// branch's output (residual) and the norm's output in bf16; backward from a
// bf16 gradient into the f32 stream's gradient.
constexpr NormMix kNormMixes[] = {
    {DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16,
     DType::kBF16},
    {DType::kF32, DType::kBF16, DType::kF32, DType::kBF16, DType::kF32, DType::kBF16,
     DType::kF32}};

TEST_F(Bf16ActivationOpsTest, NormsMatchTheCpu) {
  for (const NormMix& mix : kNormMixes) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
      const Shape shape{rows, cols};
      // An offset mean makes the two-pass variance matter.
      Pair x = Stored(shape, Uniform(rows * cols, 1.0f, 3.0f), mix.x);
      Pair r = RandomStored(shape, mix.residual), gain = Random({cols}), bias = Random({cols});
      Pair layer_sum = RandomStored(shape, mix.sum), layer_out = RandomStored(shape, mix.out);
      Pair rms_sum = RandomStored(shape, mix.sum), rms_out = RandomStored(shape, mix.out);
      Pair plain_out = RandomStored(shape, mix.out), layer_plain_out = RandomStored(shape, mix.out);
      Pair plain_mean = Random({rows}), plain_rstd = Random({rows});
      Pair mean = Random({rows}), layer_rstd = Random({rows}), rms_rstd = Random({rows});
      // In place, as the model runs it: the sum overwrites x (a copy of it).
      Pair in_place = CopyStored(x), in_place_out = RandomStored(shape, mix.out);
      Pair bx = Stored(shape, Uniform(rows * cols, 1.0f, 3.0f), mix.backward_x);
      Pair g = RandomStored(shape, mix.grad_out);
      Pair layer_gx = RandomStored(shape, mix.grad_x), rms_gx = RandomStored(shape, mix.grad_x);
      Pair layer_g_gain = Random({cols}), layer_g_bias = Random({cols});
      Pair rms_g_gain = Random({cols}), b_out = RandomStored(shape, mix.out);
      Pair b_mean = Random({rows}), b_layer_rstd = Random({rows}), b_rms_rstd = Random({rows});
      Both([&](Backend& be, Side s) {
        be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = layer_out[s],
                             .mean = mean[s], .rstd = layer_rstd[s], .residual = r[s],
                             .sum = layer_sum[s]});
        be.RmsNormForward({.x = x[s], .gain = gain[s], .out = rms_out[s], .rstd = rms_rstd[s],
                           .residual = r[s], .sum = rms_sum[s]});
        be.RmsNormForward({.x = x[s], .gain = gain[s], .out = plain_out[s]});
        be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s],
                             .out = layer_plain_out[s], .mean = plain_mean[s],
                             .rstd = plain_rstd[s]});
        be.RmsNormForward({.x = in_place[s], .gain = gain[s], .out = in_place_out[s],
                           .residual = r[s], .sum = in_place[s]});
        // The backwards, with each side's own forward statistics of bx.
        be.LayerNormForward({.x = bx[s], .gain = gain[s], .out = b_out[s], .mean = b_mean[s],
                             .rstd = b_layer_rstd[s]});
        be.LayerNormBackward({.x = bx[s], .gain = gain[s], .mean = b_mean[s],
                              .rstd = b_layer_rstd[s], .grad_out = g[s], .grad_x = layer_gx[s],
                              .grad_gain = layer_g_gain[s], .grad_bias = layer_g_bias[s]});
        be.RmsNormForward({.x = bx[s], .gain = gain[s], .out = b_out[s], .rstd = b_rms_rstd[s]});
        be.RmsNormBackward({.x = bx[s], .gain = gain[s], .rstd = b_rms_rstd[s],
                            .grad_out = g[s], .grad_x = rms_gx[s], .grad_gain = rms_g_gain[s]});
      });
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + ", " +
                               mix.Name();
      ExpectCloseAct(layer_sum, "layer_norm sum " + what);
      ExpectCloseAct(rms_sum, "rms_norm sum " + what);
      ExpectCloseAct(plain_out, "rms_norm out without a residual " + what);
      ExpectCloseAct(layer_plain_out, "layer_norm out without a residual " + what);
      ExpectCloseAct(plain_mean, "layer_norm mean without a residual " + what);
      ExpectCloseAct(plain_rstd, "layer_norm rstd without a residual " + what);
      ExpectCloseAct(in_place, "rms_norm sum in place " + what);
      ExpectCloseAct(in_place_out, "rms_norm out in place " + what);
      ExpectCloseAct(layer_out, "layer_norm out " + what);
      ExpectCloseAct(mean, "layer_norm mean " + what);
      ExpectCloseAct(layer_rstd, "layer_norm rstd " + what);
      ExpectCloseAct(rms_out, "rms_norm out " + what);
      ExpectCloseAct(rms_rstd, "rms_norm rstd " + what);
      ExpectCloseAct(layer_gx, "layer_norm grad_x " + what);
      ExpectCloseAct(layer_g_gain, "layer_norm grad_gain " + what);
      ExpectCloseAct(layer_g_bias, "layer_norm grad_bias " + what);
      ExpectCloseAct(rms_gx, "rms_norm grad_x " + what);
      ExpectCloseAct(rms_g_gain, "rms_norm grad_gain " + what);
    }
  }
}

}  // namespace
}  // namespace smallem
