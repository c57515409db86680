// CPU/CUDA parity of the fused bias + GELU (BiasGeluParams in
// engine/backend.h), forward and backward: with and without a bias, out in
// place over x, gradients added or overwritten, on f32 operands and on
// [act] operands stored as bf16.
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
using testing::kF32Tolerance;

// Shapes with a partial warp of columns, more rows than one warp's group,
// and a wide row.
const std::pair<int64_t, int64_t> kShapes[] = {{37, 11}, {1000, 13}, {3, 515}};

TEST_F(OpParityTest, BiasGeluForwardAndBackward) {
  for (auto [rows, cols] : kShapes) {
    const Shape shape{rows, cols};
    Pair x = Random(shape, 4.0f), bias = Random({cols}), g = Random(shape);
    Pair out = Random(shape), in_place = Random(shape, 4.0f), plain = Random(shape);
    Pair gx = Random(shape), gb = Random({cols}), gx_written = Random(shape);
    Pair gb_only = Random({cols}), gx_plain = Random(shape);
    Both([&](Backend& be, Side s) {
      be.BiasGeluForward({.x = x[s], .bias = bias[s], .out = out[s]});
      be.BiasGeluForward({.x = in_place[s], .bias = bias[s], .out = in_place[s]});
      be.BiasGeluForward({.x = x[s], .out = plain[s]});
      be.BiasGeluBackward({.x = x[s], .bias = bias[s], .grad_out = g[s], .grad_x = gx[s],
                           .grad_bias = gb[s]});
      be.BiasGeluBackward({.x = x[s], .bias = bias[s], .grad_out = g[s],
                           .grad_x = gx_written[s], .overwrite = true});
      be.BiasGeluBackward({.x = x[s], .bias = bias[s], .grad_out = g[s],
                           .grad_bias = gb_only[s]});
      be.BiasGeluBackward({.x = x[s], .grad_out = g[s], .grad_x = gx_plain[s]});
    });
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(out, kF32Tolerance, "bias_gelu " + what);
    ExpectClose(in_place, kF32Tolerance, "bias_gelu in place " + what);
    ExpectClose(plain, kF32Tolerance, "bias_gelu without bias " + what);
    ExpectClose(gx, kF32Tolerance, "bias_gelu grad_x " + what);
    ExpectClose(gb, kF32Tolerance, "bias_gelu grad_bias " + what);
    ExpectClose(gx_written, kF32Tolerance, "bias_gelu grad_x overwritten " + what);
    ExpectClose(gb_only, kF32Tolerance, "bias_gelu grad_bias alone " + what);
    ExpectClose(gx_plain, kF32Tolerance, "bias_gelu grad_x without bias " + what);
  }
}

TEST_F(Bf16ActivationOpsTest, BiasGeluMatchesTheCpu) {
  for (auto [rows, cols] : kShapes) {
    const Shape shape{rows, cols};
    Pair x = RandomStored(shape, kBf16, 4.0f), bias = Random({cols});
    Pair g = RandomStored(shape, kBf16);
    Pair out = RandomStored(shape, kBf16), gx = RandomStored(shape, kBf16);
    Pair gx_written = RandomStored(shape, kBf16), gb = Random({cols});
    Both([&](Backend& be, Side s) {
      be.BiasGeluForward({.x = x[s], .bias = bias[s], .out = out[s]});
      be.BiasGeluBackward({.x = x[s], .bias = bias[s], .grad_out = g[s], .grad_x = gx[s],
                           .grad_bias = gb[s]});
      be.BiasGeluBackward({.x = x[s], .bias = bias[s], .grad_out = g[s],
                           .grad_x = gx_written[s], .overwrite = true});
    });
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectCloseAct(out, "bias_gelu " + what);
    ExpectCloseAct(gx, "bias_gelu grad_x " + what);
    ExpectCloseAct(gx_written, "bias_gelu grad_x overwritten " + what);
    ExpectCloseAct(gb, "bias_gelu grad_bias " + what);
  }
}

}  // namespace
}  // namespace smallem
