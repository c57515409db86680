// The fused bias + GELU op (BiasGeluParams in engine/backend.h) on the CPU
// reference: the bits of BiasAdd then GELU, its gradients against central
// differences, the same bits at any thread count; and on the tape, the
// gradients that are written rather than zeroed and added (BiasGelu's
// input, a residual add's inputs through Tape::ShareGrad).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/bf16.h"
#include "engine/cpu/cpu_backend.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

class BiasGeluTest : public testing::CpuOpTest {
 protected:
  Tensor Copy(const Tensor& t) { return FromValues(t.shape, Values(t)); }
  static uint16_t* Bits(const Tensor& t) { return static_cast<uint16_t*>(t.data); }
};

// Every shape: one row, rows narrower than a vector, a tail after full
// vectors, and enough elements for both threads.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 5}, {7, 3}, {37, 21}, {260, 130}};

TEST_F(BiasGeluTest, EqualsBiasAddThenGeluBitForBit) {
  for (auto [rows, cols] : kShapes) {
    Tensor x = Random({rows, cols}, -4, 4), bias = Random({cols}), g = Random({rows, cols});
    // The separate ops, as the model ran them before: x + bias in place,
    // GELU, GELU's backward into a zeroed gradient, the bias's column sum.
    Tensor pre = Copy(x), want = Zeros({rows, cols}), want_gx = Zeros({rows, cols});
    Tensor want_gb = Random({cols});
    Tensor got_gb = Copy(want_gb);
    backend_.BiasAdd({.x = pre, .bias = bias});
    backend_.GeluForward({.in = pre, .out = want});
    backend_.GeluBackward({.in = pre, .grad_out = g, .grad_in = want_gx});
    backend_.BiasBackward({.grad_out = want_gx, .grad_bias = want_gb});

    Tensor got = Zeros({rows, cols}), in_place = Copy(x);
    Tensor got_gx = Random({rows, cols});  // overwritten: its values must not matter
    got_gx.f32()[0] = std::numeric_limits<float>::quiet_NaN();
    backend_.BiasGeluForward({.x = x, .bias = bias, .out = got});
    backend_.BiasGeluForward({.x = in_place, .bias = bias, .out = in_place});
    backend_.BiasGeluBackward({.x = x, .bias = bias, .grad_out = g, .grad_x = got_gx,
                               .grad_bias = got_gb, .overwrite = true});
    EXPECT_EQ(Values(got), Values(want)) << rows << "x" << cols;
    EXPECT_EQ(Values(in_place), Values(want)) << "in place, " << rows << "x" << cols;
    EXPECT_EQ(Values(got_gx), Values(want_gx)) << rows << "x" << cols;
    EXPECT_EQ(Values(got_gb), Values(want_gb)) << rows << "x" << cols;

    // Without a bias: GELU itself.
    Tensor plain = Zeros({rows, cols}), want_plain = Zeros({rows, cols});
    backend_.GeluForward({.in = x, .out = want_plain});
    backend_.BiasGeluForward({.x = x, .out = plain});
    EXPECT_EQ(Values(plain), Values(want_plain)) << "no bias, " << rows << "x" << cols;
  }
}

TEST_F(BiasGeluTest, GradientsMatchCentralDifferencesAndAccumulate) {
  for (auto [rows, cols] : kShapes) {
    Tensor x = Random({rows, cols}, -3, 3), bias = Random({cols}), w = Random({rows, cols});
    Tensor out = Zeros({rows, cols});
    Tensor gx = Random({rows, cols}), gb = Random({cols});
    const std::vector<float> gx0 = Values(gx), gb0 = Values(gb);
    backend_.BiasGeluBackward(
        {.x = x, .bias = bias, .grad_out = w, .grad_x = gx, .grad_bias = gb});
    // L = Σ w·out in double.
    auto loss = [&] {
      backend_.BiasGeluForward({.x = x, .bias = bias, .out = out});
      double sum = 0;
      for (int64_t i = 0; i < out.numel(); ++i) sum += double{w.f32()[i]} * out.f32()[i];
      return sum;
    };
    auto numeric = [&](float& v) {
      const float v0 = v, plus = v0 + 1e-2f, minus = v0 - 1e-2f;
      v = plus;
      const double up = loss();
      v = minus;
      const double down = loss();
      v = v0;
      return (up - down) / (double{plus} - minus);
    };
    for (int64_t i = 0; i < x.numel(); i += 1 + x.numel() / 50) {
      const double want = numeric(x.f32()[i]);
      EXPECT_NEAR(double{gx.f32()[i]} - gx0[i], want, 1e-2 * std::abs(want) + 1e-3)
          << "grad_x " << i << " of " << rows << "x" << cols;
    }
    for (int64_t c = 0; c < cols; c += 1 + cols / 20) {
      const double want = numeric(bias.f32()[c]);
      EXPECT_NEAR(double{gb.f32()[c]} - gb0[c], want, 1e-2 * std::abs(want) + 1e-3)
          << "grad_bias " << c << " of " << rows << "x" << cols;
    }
  }
}

// The fused op runs GELU's backward on row slices: an element's value
// must not depend on where its slice starts or ends.
TEST_F(BiasGeluTest, GeluBackwardGivesAnElementTheSameBitsAtAnyOffset) {
  const int64_t n = 67;
  Tensor x = Random({n}, -4, 4), g = Random({n}), whole = Zeros({n}), pieces = Zeros({n});
  backend_.GeluBackward({.in = x, .grad_out = g, .grad_in = whole});
  for (int64_t i = 0; i < n; ++i) {
    const Shape one{1};
    backend_.GeluBackward({.in = {.data = x.f32() + i, .shape = one},
                           .grad_out = {.data = g.f32() + i, .shape = one},
                           .grad_in = {.data = pieces.f32() + i, .shape = one}});
  }
  EXPECT_EQ(Values(pieces), Values(whole));
}

TEST_F(BiasGeluTest, SameBitsAtAnyThreadCount) {
  const int64_t rows = 300, cols = 130;  // 39,000 elements: both threads work
  Tensor x = Random({rows, cols}, -4, 4), bias = Random({cols}), g = Random({rows, cols});
  std::vector<float> results[2];
  for (int threads : {1, 2}) {
    CpuBackend backend(TestCpuOptions(threads));
    Tensor out = Zeros({rows, cols}), gx = Zeros({rows, cols}), gb = Zeros({cols});
    backend.BiasGeluForward({.x = x, .bias = bias, .out = out});
    backend.BiasGeluBackward(
        {.x = x, .bias = bias, .grad_out = g, .grad_x = gx, .grad_bias = gb, .overwrite = true});
    std::vector<float>& r = results[threads - 1];
    for (const Tensor& t : {out, gx, gb}) {
      for (float v : Values(t)) r.push_back(v);
    }
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST_F(BiasGeluTest, Bf16OperandsAreTheF32OpOnTheirValuesRounded) {
  const int64_t rows = 37, cols = 21;
  Tensor x = Random({rows, cols}, -4, 4), bias = Random({cols}), g = Random({rows, cols});
  // The bf16 copies and their exact f32 values.
  Tensor x16 = Zeros({rows, cols}, DType::kBF16), g16 = Zeros({rows, cols}, DType::kBF16);
  for (auto [f, b] : {std::pair{&x, &x16}, std::pair{&g, &g16}}) {
    for (int64_t i = 0; i < f->numel(); ++i) {
      Bits(*b)[i] = FloatToBf16(f->f32()[i]);
      f->f32()[i] = Bf16ToFloat(Bits(*b)[i]);
    }
  }
  Tensor out = Zeros({rows, cols}), gx = Zeros({rows, cols}), gb = Zeros({cols});
  Tensor out16 = Zeros({rows, cols}, DType::kBF16), gx16 = Zeros({rows, cols}, DType::kBF16);
  Tensor gb16 = Zeros({cols});
  backend_.BiasGeluForward({.x = x, .bias = bias, .out = out});
  backend_.BiasGeluBackward(
      {.x = x, .bias = bias, .grad_out = g, .grad_x = gx, .grad_bias = gb, .overwrite = true});
  backend_.BiasGeluForward({.x = x16, .bias = bias, .out = out16});
  backend_.BiasGeluBackward({.x = x16, .bias = bias, .grad_out = g16, .grad_x = gx16,
                             .grad_bias = gb16, .overwrite = true});
  for (int64_t i = 0; i < out.numel(); ++i) {
    ASSERT_EQ(Bits(out16)[i], FloatToBf16(out.f32()[i])) << "out " << i;
    ASSERT_EQ(Bits(gx16)[i], FloatToBf16(gx.f32()[i])) << "grad_x " << i;
  }
  EXPECT_EQ(Values(gb16), Values(gb)) << "the bias's gradient sums the f32 values";
}

// On the tape, with the arena poisoned with NaN: BiasGelu's input gradient
// and a residual add's input gradients are written, never read before; the
// gradients equal those of a clean arena, and of the unfused ops.
TEST_F(BiasGeluTest, TapeWritesFreshGradientsAndMatchesTheUnfusedOps) {
  const int64_t rows = 9, in = 6, hidden = 10, vocab = 11;
  Tensor x = Random({rows, in}), targets = Ids({rows}, vocab);
  Tensor w1 = Random({hidden, in}), b1 = Random({hidden});
  Tensor w2 = Random({in, hidden}), w3 = Random({vocab, in});
  std::vector<float> grads[3];
  for (int run = 0; run < 3; ++run) {
    const bool poisoned = run == 1, unfused = run == 2;
    Arena arena(backend_, 1 << 20);
    if (poisoned) {
      backend_.Fill(arena.Allocate({(1 << 20) / 4}), std::numeric_limits<float>::quiet_NaN());
      arena.Reset();
    }
    Tape tape(backend_, arena);
    Tensor d1 = Zeros(w1.shape), db = Zeros(b1.shape), d2 = Zeros(w2.shape);
    Tensor d3 = Zeros(w3.shape), dx = Zeros(x.shape);
    Var vx = tape.Param(x, dx);
    Var h = unfused ? Gelu(tape, Linear(tape, vx, tape.Param(w1, d1), tape.Param(b1, db)))
                    : BiasGelu(tape, Linear(tape, vx, tape.Param(w1, d1)), tape.Param(b1, db));
    // A residual add whose inputs have no gradient yet: one takes the sum's
    // gradient memory, the other a copy.
    Var r = Add(tape, Linear(tape, h, tape.Param(w2, d2)), Mul(tape, vx, vx));
    Var logits = Linear(tape, r, tape.Param(w3, d3), Var{}, Output::kF32);
    tape.Backward(Mean(tape, CrossEntropy(tape, logits, tape.Input(targets))));
    for (const Tensor& d : {d1, db, d2, d3, dx}) {
      for (float v : Values(d)) grads[run].push_back(v);
    }
  }
  for (float v : grads[1]) ASSERT_FALSE(std::isnan(v)) << "a fresh gradient was read";
  EXPECT_EQ(grads[1], grads[0]);
  EXPECT_EQ(grads[2], grads[0]) << "the fused op's gradients differ from BiasAdd + GELU";
}

// Add(a, a): the gradient that takes the sum's memory still gets both
// contributions.
TEST_F(BiasGeluTest, AddOfAValueToItselfDoublesItsGradient) {
  const int64_t rows = 5, cols = 4;
  Tensor x = Random({rows, cols}), w = Random({cols, cols}), dw = Zeros({cols, cols});
  Tensor dw_twice = Zeros({cols, cols});
  for (int doubled = 0; doubled < 2; ++doubled) {
    Arena arena(backend_, 1 << 20);
    Tape tape(backend_, arena);
    Var y = Linear(tape, tape.Input(x), tape.Param(w, doubled ? dw_twice : dw));
    tape.Backward(Mean(tape, doubled ? Add(tape, y, y) : y));
  }
  for (int64_t i = 0; i < dw.numel(); ++i) {
    EXPECT_FLOAT_EQ(dw_twice.f32()[i], 2 * dw.f32()[i]) << i;
  }
}

}  // namespace
}  // namespace smallem
