// CPU/CUDA parity of the elementwise ops (Add, Mul, GELU, SiLU, SwiGLU) and
// BiasAdd, forward and backward: on f32 operands, then on [act] operands
// stored as bf16 (Bf16ActivationOpsTest).
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
using testing::StorageMix;
using testing::kElementwiseMixes;
using testing::kF32Tolerance;

TEST_F(OpParityTest, AddForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair a = Random(shape), b = Random(shape), out = Random(shape);
  Pair g = Random(shape), ga = Random(shape), gb = Random(shape), gsame = Random(shape);
  Both([&](Backend& be, Side s) {
    be.Add({.a = a[s], .b = b[s], .out = out[s]});
    be.AddBackward({.grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
    // out = x + x: both gradients land in one buffer.
    be.AddBackward({.grad_out = g[s], .grad_a = gsame[s], .grad_b = gsame[s]});
  });
  ExpectClose(out, kF32Tolerance, "add");
  ExpectClose(ga, kF32Tolerance, "add grad_a");
  ExpectClose(gb, kF32Tolerance, "add grad_b");
  ExpectClose(gsame, kF32Tolerance, "add grad of x + x");
}

TEST_F(OpParityTest, MulForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair a = Random(shape), b = Random(shape), out = Random(shape), in_place = Random(shape);
  Pair g = Random(shape), ga = Random(shape), gb = Random(shape), gb_only = Random(shape);
  Both([&](Backend& be, Side s) {
    be.Mul({.a = a[s], .b = b[s], .out = out[s]});
    be.Mul({.a = in_place[s], .b = b[s], .out = in_place[s]});
    be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
    be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_b = gb_only[s]});
  });
  ExpectClose(out, kF32Tolerance, "mul");
  ExpectClose(in_place, kF32Tolerance, "mul in place");
  ExpectClose(ga, kF32Tolerance, "mul grad_a");
  ExpectClose(gb, kF32Tolerance, "mul grad_b");
  ExpectClose(gb_only, kF32Tolerance, "mul grad_b alone");
}

TEST_F(OpParityTest, GeluAndSiluForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair x = Random(shape, 6.0f), g = Random(shape);
  Pair gelu = Random(shape), silu = Random(shape);
  Pair gelu_grad = Random(shape), silu_grad = Random(shape);
  Both([&](Backend& be, Side s) {
    be.GeluForward({.in = x[s], .out = gelu[s]});
    be.SiluForward({.in = x[s], .out = silu[s]});
    be.GeluBackward({.in = x[s], .grad_out = g[s], .grad_in = gelu_grad[s]});
    be.SiluBackward({.in = x[s], .grad_out = g[s], .grad_in = silu_grad[s]});
  });
  ExpectClose(gelu, kF32Tolerance, "gelu");
  ExpectClose(silu, kF32Tolerance, "silu");
  ExpectClose(gelu_grad, kF32Tolerance, "gelu backward");
  ExpectClose(silu_grad, kF32Tolerance, "silu backward");
}

TEST_F(OpParityTest, SwiGluForwardAndBackward) {
  const Shape shape{37, 24};
  Pair gate = Random(shape, 5.0f), up = Random(shape), out = Random(shape);
  Pair g = Random(shape), g_gate = Random(shape), g_up = Random(shape);
  Pair g_gate_only = Random(shape);
  Both([&](Backend& be, Side s) {
    be.SwiGluForward({.gate = gate[s], .up = up[s], .out = out[s]});
    be.SwiGluBackward({.gate = gate[s], .up = up[s], .grad_out = g[s], .grad_gate = g_gate[s],
                       .grad_up = g_up[s]});
    be.SwiGluBackward({.gate = gate[s], .up = up[s], .grad_out = g[s],
                       .grad_gate = g_gate_only[s]});
  });
  ExpectClose(out, kF32Tolerance, "swiglu");
  ExpectClose(g_gate, kF32Tolerance, "swiglu grad_gate");
  ExpectClose(g_up, kF32Tolerance, "swiglu grad_up");
  ExpectClose(g_gate_only, kF32Tolerance, "swiglu grad_gate alone");
  // Overwritten: the random starts are never read.
  Both([&](Backend& be, Side s) {
    be.SwiGluBackward({.gate = gate[s], .up = up[s], .grad_out = g[s], .grad_gate = g_gate[s],
                       .grad_up = g_up[s], .overwrite = true});
  });
  ExpectClose(g_gate, kF32Tolerance, "swiglu grad_gate overwritten");
  ExpectClose(g_up, kF32Tolerance, "swiglu grad_up overwritten");
}

TEST_F(OpParityTest, BiasAddForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 11}, {1000, 13}, {3, 515}}) {
    Pair x = Random({rows, cols}), bias = Random({cols});
    Pair g = Random({rows, cols}), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.BiasAdd({.x = x[s], .bias = bias[s]});
      be.BiasBackward({.grad_out = g[s], .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(x, kF32Tolerance, "bias_add " + shape);
    ExpectClose(g_bias, kF32Tolerance, "bias backward " + shape);
  }
}

TEST_F(Bf16ActivationOpsTest, AddAndMulMatchTheCpu) {
  const Shape shape{5, 7, 11};
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair a = RandomStored(shape, mix.in), b = RandomStored(shape, mix.in), g = RandomStored(shape, mix.in);
    Pair sum = RandomStored(shape, mix.out), product = RandomStored(shape, mix.out);
    Pair ga = RandomStored(shape, mix.out), gb = RandomStored(shape, mix.out);
    Pair gsame = RandomStored(shape, mix.out), ma = RandomStored(shape, mix.out);
    Pair mb = RandomStored(shape, mix.out);
    Both([&](Backend& be, Side s) {
      be.Add({.a = a[s], .b = b[s], .out = sum[s]});
      be.AddBackward({.grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
      be.AddBackward({.grad_out = g[s], .grad_a = gsame[s], .grad_b = gsame[s]});
      be.Mul({.a = a[s], .b = b[s], .out = product[s]});
      be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_a = ma[s], .grad_b = mb[s]});
    });
    const std::string what = mix.Name();
    ExpectCloseAct(sum, "add, " + what);
    ExpectCloseAct(ga, "add grad_a, " + what);
    ExpectCloseAct(gb, "add grad_b, " + what);
    ExpectCloseAct(gsame, "add grad of x + x, " + what);
    ExpectCloseAct(product, "mul, " + what);
    ExpectCloseAct(ma, "mul grad_a, " + what);
    ExpectCloseAct(mb, "mul grad_b, " + what);
  }
  // In place, all bf16: out = a · b into a.
  Pair a = RandomStored(shape, kBf16), b = RandomStored(shape, kBf16);
  Both([&](Backend& be, Side s) { be.Mul({.a = a[s], .b = b[s], .out = a[s]}); });
  ExpectCloseAct(a, "mul in place");
}

TEST_F(Bf16ActivationOpsTest, ActivationFunctionsMatchTheCpu) {
  const Shape shape{37, 24};
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair x = RandomStored(shape, mix.in, 6.0f), up = RandomStored(shape, mix.in);
    Pair g = RandomStored(shape, mix.in);
    Pair gelu = RandomStored(shape, mix.out), silu = RandomStored(shape, mix.out);
    Pair swiglu = RandomStored(shape, mix.out);
    Pair gelu_grad = RandomStored(shape, mix.out), silu_grad = RandomStored(shape, mix.out);
    Pair g_gate = RandomStored(shape, mix.out), g_up = RandomStored(shape, mix.out);
    Both([&](Backend& be, Side s) {
      be.GeluForward({.in = x[s], .out = gelu[s]});
      be.SiluForward({.in = x[s], .out = silu[s]});
      be.SwiGluForward({.gate = x[s], .up = up[s], .out = swiglu[s]});
      be.GeluBackward({.in = x[s], .grad_out = g[s], .grad_in = gelu_grad[s]});
      be.SiluBackward({.in = x[s], .grad_out = g[s], .grad_in = silu_grad[s]});
      be.SwiGluBackward({.gate = x[s], .up = up[s], .grad_out = g[s], .grad_gate = g_gate[s],
                         .grad_up = g_up[s]});
    });
    const std::string what = mix.Name();
    ExpectCloseAct(gelu, "gelu, " + what);
    ExpectCloseAct(silu, "silu, " + what);
    ExpectCloseAct(swiglu, "swiglu, " + what);
    ExpectCloseAct(gelu_grad, "gelu backward, " + what);
    ExpectCloseAct(silu_grad, "silu backward, " + what);
    ExpectCloseAct(g_gate, "swiglu grad_gate, " + what);
    ExpectCloseAct(g_up, "swiglu grad_up, " + what);
  }
}

TEST_F(Bf16ActivationOpsTest, BiasAddMatchesTheCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 11}, {1000, 13}, {3, 515}}) {
    Pair x = RandomStored({rows, cols}, kBf16), bias = Random({cols});
    Pair g = RandomStored({rows, cols}, kBf16), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.BiasAdd({.x = x[s], .bias = bias[s]});
      be.BiasBackward({.grad_out = g[s], .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectCloseAct(x, "bias_add " + shape);
    ExpectCloseAct(g_bias, "bias backward " + shape);
  }
}

}  // namespace
}  // namespace smallem
