// Finite-difference gradient checks of every backward op on the CPU backend.
// Each case projects the op's outputs on fixed random weights, L = Σ w·out,
// and compares the analytic gradients with central differences of L in
// double. Gradients start pre-filled with random values, so the checks also
// prove that backward ops accumulate (+=) rather than overwrite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

using TensorPairs = std::vector<std::pair<Tensor, Tensor>>;

class OpGradientTest : public testing::CpuOpTest {
 protected:
  // `forward` computes the outputs from the inputs; `backward` adds into
  // each grad_in from the grad_outs. outputs holds (out, grad_out) pairs,
  // inputs (in, grad_in) pairs. Checks every element of inputs up to 400
  // elements, `samples` random ones of larger inputs.
  void Check(const std::string& name, const std::function<void()>& forward,
             const std::function<void()>& backward, const TensorPairs& outputs,
             const TensorPairs& inputs, int64_t samples = 30) {
    constexpr double kEps = 1e-2, kTolerance = 1e-2;
    for (auto& [out, grad_out] : outputs) FillRandom(grad_out);
    std::vector<std::vector<float>> prefill;
    for (auto& [in, grad] : inputs) {
      FillRandom(grad);
      prefill.push_back(Values(grad));
    }
    forward();
    backward();

    auto loss = [&] {
      forward();
      double sum = 0;
      for (auto& [out, w] : outputs) {
        for (int64_t i = 0; i < out.numel(); ++i) sum += double{w.f32()[i]} * out.f32()[i];
      }
      return sum;
    };
    for (size_t k = 0; k < inputs.size(); ++k) {
      Tensor in = inputs[k].first, grad = inputs[k].second;
      std::vector<int64_t> indices;
      if (in.numel() <= 400) {
        for (int64_t i = 0; i < in.numel(); ++i) indices.push_back(i);
      } else {
        std::uniform_int_distribution<int64_t> pick(0, in.numel() - 1);
        for (int64_t s = 0; s < samples; ++s) indices.push_back(pick(rng_));
      }
      for (int64_t i : indices) {
        float& x = in.f32()[i];
        const float x0 = x;
        // Divide by the perturbation float arithmetic actually made.
        const float plus = static_cast<float>(x0 + kEps);
        const float minus = static_cast<float>(x0 - kEps);
        x = plus;
        const double loss_plus = loss();
        x = minus;
        const double loss_minus = loss();
        x = x0;
        const double numeric = (loss_plus - loss_minus) / (double{plus} - minus);
        const double analytic = double{grad.f32()[i]} - prefill[k][i];
        EXPECT_NEAR(analytic, numeric, kTolerance * std::abs(numeric) + 1e-3)
            << name << ": input " << k << " element " << i;
      }
    }
  }
};

TEST_F(OpGradientTest, MatmulGradientsAreMatmulsWithTransposes) {
  // y = x·wᵀ (a linear layer): dx = dy·w, dw = dyᵀ·x.
  const int64_t n = 5, in = 7, out = 11;
  Tensor x = Random({n, in}), w = Random({out, in}), y = Zeros({n, out});
  Tensor dx = Zeros({n, in}), dw = Zeros({out, in}), dy = Zeros({n, out});
  Check(
      "matmul",
      [&] {
        backend_.Matmul(
            {.a = x, .b = w, .out = y, .m = n, .n = out, .k = in, .trans_b = true});
      },
      [&] {
        backend_.Matmul({.a = dy, .b = w, .out = dx, .m = n, .n = in, .k = out, .beta = 1});
        backend_.Matmul({.a = dy, .b = x, .out = dw, .m = out, .n = in, .k = n,
                         .trans_a = true, .beta = 1});
      },
      {{y, dy}}, {{x, dx}, {w, dw}});
}

TEST_F(OpGradientTest, AddAndMul) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor a = Random({n}), b = Random({n}), out = Zeros({n});
    Tensor da = Zeros({n}), db = Zeros({n}), dout = Zeros({n});
    Check("add", [&] { backend_.Add({a, b, out}); },
          [&] { backend_.AddBackward({a, b, dout, da, db}); }, {{out, dout}},
          {{a, da}, {b, db}});
    Check("mul", [&] { backend_.Mul({a, b, out}); },
          [&] { backend_.MulBackward({a, b, dout, da, db}); }, {{out, dout}},
          {{a, da}, {b, db}});
  }
}

TEST_F(OpGradientTest, GeluSiluAndSwiGlu) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor gate = Random({n}, -4, 4), up = Random({n}), out = Zeros({n});
    Tensor dgate = Zeros({n}), dup = Zeros({n}), dout = Zeros({n});
    Check("gelu", [&] { backend_.GeluForward({gate, out}); },
          [&] { backend_.GeluBackward({gate, dout, dgate}); }, {{out, dout}},
          {{gate, dgate}});
    Check("silu", [&] { backend_.SiluForward({gate, out}); },
          [&] { backend_.SiluBackward({gate, dout, dgate}); }, {{out, dout}},
          {{gate, dgate}});
    Check("swiglu", [&] { backend_.SwiGluForward({gate, up, out}); },
          [&] { backend_.SwiGluBackward({gate, up, dout, dgate, dup}); },
          {{out, dout}}, {{gate, dgate}, {up, dup}});
  }
}

TEST_F(OpGradientTest, SwiGluSkipsAnEmptyGradient) {
  const int64_t n = 35;
  Tensor gate = Random({n}), up = Random({n}), out = Zeros({n});
  Tensor dgate = Zeros({n}), dup = Zeros({n}), dout = Zeros({n});
  auto forward = [&] { backend_.SwiGluForward({gate, up, out}); };
  Check("swiglu up only", forward,
        [&] { backend_.SwiGluBackward({gate, up, dout, Tensor{}, dup}); },
        {{out, dout}}, {{up, dup}});
  Check("swiglu gate only", forward,
        [&] { backend_.SwiGluBackward({gate, up, dout, dgate, Tensor{}}); },
        {{out, dout}}, {{gate, dgate}});
}

TEST_F(OpGradientTest, BiasAdd) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    Tensor x = Random({rows, cols}), bias = Random({cols}), out = Zeros({rows, cols});
    Tensor dbias = Zeros({cols}), dout = Zeros({rows, cols});
    Check(
        "bias_add",
        [&] {
          backend_.CopyOnDevice(out.data, x.data, x.bytes());
          backend_.BiasAdd({out, bias});
        },
        [&] { backend_.BiasBackward({dout, dbias}); }, {{out, dout}}, {{bias, dbias}});
  }
}

TEST_F(OpGradientTest, LayerNorm) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    NormParams p;
    p.x = Random({rows, cols}, -2, 2), p.gain = Random({cols}), p.bias = Random({cols});
    p.out = Zeros({rows, cols}), p.mean = Zeros({rows}), p.rstd = Zeros({rows});
    NormBackwardParams b;
    b.x = p.x, b.gain = p.gain, b.mean = p.mean, b.rstd = p.rstd;
    b.grad_out = Zeros({rows, cols}), b.grad_x = Zeros({rows, cols});
    b.grad_gain = Zeros({cols}), b.grad_bias = Zeros({cols});
    Check("layer_norm", [&] { backend_.LayerNormForward(p); },
          [&] { backend_.LayerNormBackward(b); }, {{p.out, b.grad_out}},
          {{p.x, b.grad_x}, {p.gain, b.grad_gain}, {p.bias, b.grad_bias}});
  }
}

TEST_F(OpGradientTest, RmsNorm) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    NormParams p;
    p.x = Random({rows, cols}, -2, 2), p.gain = Random({cols});
    p.out = Zeros({rows, cols}), p.rstd = Zeros({rows});
    NormBackwardParams b;
    b.x = p.x, b.gain = p.gain, b.rstd = p.rstd;
    b.grad_out = Zeros({rows, cols}), b.grad_x = Zeros({rows, cols});
    b.grad_gain = Zeros({cols});
    Check("rms_norm", [&] { backend_.RmsNormForward(p); },
          [&] { backend_.RmsNormBackward(b); }, {{p.out, b.grad_out}},
          {{p.x, b.grad_x}, {p.gain, b.grad_gain}});
  }
}

// The fused residual add and norm on a tape (AddLayerNorm, AddRmsNorm), with
// both of its outputs used downstream: L = Σ w_sum·sum + Σ w_normed·normed,
// the loss built on the tape as mean(sum·(n·w_sum) + normed·(n·w_normed)).
TEST_F(OpGradientTest, AddNormOnTheTape) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    for (bool layer : {true, false}) {
      Tensor x = Random({rows, cols}, -2, 2), residual = Random({rows, cols});
      Tensor gain = Random({cols}), bias = Random({cols});
      Tensor dx = Zeros({rows, cols}), dresidual = Zeros({rows, cols});
      Tensor dgain = Zeros({cols}), dbias = Zeros({cols});
      Tensor sum = Zeros({rows, cols}), normed = Zeros({rows, cols});
      Tensor w_sum = Zeros({rows, cols}), w_normed = Zeros({rows, cols});
      Arena arena(backend_, 1 << 20);
      Tape tape(backend_, arena);
      // Records the op on a fresh tape.
      auto record = [&] {
        tape.Reset();
        arena.Reset();
        Var vx = tape.Param(x, dx), vr = tape.Param(residual, dresidual);
        Var vg = tape.Param(gain, dgain);
        return layer ? AddLayerNorm(tape, vx, vr, vg, tape.Param(bias, dbias))
                     : AddRmsNorm(tape, vx, vr, vg);
      };
      auto forward = [&] {
        const NormedSum y = record();
        std::memcpy(sum.data, tape.value(y.sum).data, sum.bytes());
        std::memcpy(normed.data, tape.value(y.normed).data, normed.bytes());
      };
      auto backward = [&] {
        const NormedSum y = record();
        const float n = static_cast<float>(rows * cols);
        auto scaled = [&](const Tensor& w) {
          Tensor t = tape.NewTensor(w.shape);
          for (int64_t i = 0; i < w.numel(); ++i) t.f32()[i] = n * w.f32()[i];
          return tape.Input(t);
        };
        Var loss = Mean(tape, Add(tape, Mul(tape, y.sum, scaled(w_sum)),
                                  Mul(tape, y.normed, scaled(w_normed))));
        tape.Backward(loss);
      };
      TensorPairs inputs = {{x, dx}, {residual, dresidual}, {gain, dgain}};
      if (layer) inputs.push_back({bias, dbias});
      Check(layer ? "add_layer_norm" : "add_rms_norm", forward, backward,
            {{sum, w_sum}, {normed, w_normed}}, inputs);
    }
  }
}

// The fused op records the nodes of Add then the norm, so its gradients are
// theirs bit for bit (the whole model's results depend on it).
TEST_F(OpGradientTest, AddNormGradientsEqualAddThenNormBitForBit) {
  const int64_t rows = 67, cols = 257;
  for (bool layer : {true, false}) {
    Tensor x = Random({rows, cols}, -2, 2), residual = Random({rows, cols});
    Tensor gain = Random({cols}), bias = Random({cols}), w = Random({rows, cols});
    // Gradients of x, residual, gain, bias: [0] separate ops, [1] fused.
    Tensor grads[2][4];
    for (auto& g : grads) {
      g[0] = Zeros({rows, cols}), g[1] = Zeros({rows, cols});
      g[2] = Zeros({cols}), g[3] = Zeros({cols});
    }
    Tensor values[2][2];  // sum, normed
    for (int fused = 0; fused < 2; ++fused) {
      Arena arena(backend_, 1 << 20);
      Tape tape(backend_, arena);
      Tensor* g = grads[fused];
      Var vx = tape.Param(x, g[0]), vr = tape.Param(residual, g[1]);
      Var vg = tape.Param(gain, g[2]), vb = layer ? tape.Param(bias, g[3]) : Var{};
      NormedSum y;
      if (fused) {
        y = layer ? AddLayerNorm(tape, vx, vr, vg, vb) : AddRmsNorm(tape, vx, vr, vg);
      } else {
        y.sum = Add(tape, vx, vr);
        y.normed = layer ? LayerNorm(tape, y.sum, vg, vb) : RmsNorm(tape, y.sum, vg);
      }
      // Both outputs feed the loss, as in a transformer block.
      Var loss = Mean(tape, Mul(tape, Add(tape, y.sum, y.normed), tape.Input(w)));
      tape.Backward(loss);
      for (int k = 0; k < 2; ++k) {
        const Tensor v = tape.value(k == 0 ? y.sum : y.normed);
        values[fused][k] = Zeros(v.shape);
        std::memcpy(values[fused][k].data, v.data, v.bytes());
      }
    }
    const char* kind = layer ? "layer_norm " : "rms_norm ";
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(Values(values[0][k]), Values(values[1][k])) << kind << "value " << k;
    }
    for (int k = 0; k < (layer ? 4 : 3); ++k) {
      EXPECT_EQ(Values(grads[0][k]), Values(grads[1][k])) << kind << "gradient " << k;
    }
  }
}

TEST_F(OpGradientTest, Rope) {
  const int64_t batch = 2, time = 5, d = 4, width = 11, offset = 2;
  RopeParams p;
  p.x = Random({batch, time, width}), p.out = Zeros({batch, time, width});
  p.cos = Zeros({time + offset, d / 2}), p.sin = Zeros({time + offset, d / 2});
  for (int64_t m = 0; m < time + offset; ++m) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = m * std::pow(10000.0, -2.0 * i / d);
      p.cos.f32()[m * d / 2 + i] = static_cast<float>(std::cos(angle));
      p.sin.f32()[m * d / 2 + i] = static_cast<float>(std::sin(angle));
    }
  }
  p.time = time, p.head_dim = d, p.rotate_channels = 2 * d, p.position_offset = offset;
  Tensor dx = Zeros({batch, time, width}), dout = Zeros({batch, time, width});
  Check("rope", [&] { backend_.RopeForward(p); },
        [&] { backend_.RopeBackward({dout, dx, p.cos, p.sin, time, d, 2 * d, offset}); },
        {{p.out, dout}}, {{p.x, dx}});
}

TEST_F(OpGradientTest, Attention) {
  // Small odd shapes, then a T spanning three query blocks (the last one
  // ragged); the backward recomputing the softmax, then reading the
  // forward's saved one.
  for (bool save : {false, true}) {
  for (auto [batch, time, heads, d] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 5, 3, 4}, {1, 150, 2, 8}}) {
    SCOPED_TRACE(save ? "saved softmax" : "recomputed softmax");
    const int64_t c = heads * d;
    AttentionParams p;
    p.qkv = Random({batch, time, 3 * c}, -1.5, 1.5);
    p.out = Zeros({batch, time, c}), p.lse = Zeros({batch, heads, time});
    if (save) p.probs = Random({batch, heads, time, time});  // stale values must not leak
    p.batch = batch, p.time = time, p.heads = heads, p.head_dim = d;
    AttentionBackwardParams b;
    b.qkv = p.qkv, b.out = p.out, b.lse = p.lse, b.probs = p.probs;
    b.grad_out = Zeros({batch, time, c}), b.grad_qkv = Zeros({batch, time, 3 * c});
    b.batch = batch, b.time = time, b.heads = heads, b.head_dim = d;
    Check("attention", [&] { backend_.AttentionForward(p); },
          [&] { backend_.AttentionBackward(b); }, {{p.out, b.grad_out}},
          {{p.qkv, b.grad_qkv}}, /*samples=*/150);
  }
  }
}

TEST_F(OpGradientTest, LatentQkv) {
  // Odd sizes: 3 heads of 6 channels, 2 of them rotary, 7 rows.
  const int64_t rows = 7, heads = 3, d = 6, r = 2, c = heads * d;
  LatentQkvParams p{.q = Random({rows, c}), .kv = Random({rows, heads * (2 * d - r)}),
                    .k_rope = Random({rows, r}), .out = Zeros({rows, 3 * c}),
                    .heads = heads, .head_dim = d, .rope_dim = r};
  LatentQkvBackwardParams b{.grad_out = Zeros({rows, 3 * c}), .grad_q = Zeros(p.q.shape),
                            .grad_kv = Zeros(p.kv.shape), .grad_k_rope = Zeros(p.k_rope.shape),
                            .heads = heads, .head_dim = d, .rope_dim = r};
  Check("latent_qkv", [&] { backend_.LatentQkvForward(p); },
        [&] { backend_.LatentQkvBackward(b); }, {{p.out, b.grad_out}},
        {{p.q, b.grad_q}, {p.kv, b.grad_kv}, {p.k_rope, b.grad_k_rope}});
  // Where the shared rotary key lands: the first r channels of every key head.
  backend_.LatentQkvForward(p);
  for (int64_t h = 0; h < heads; ++h) {
    EXPECT_EQ(p.out.f32()[c + h * d + 1], p.k_rope.f32()[1]) << "head " << h;
    // The query's content part follows its rotary part.
    EXPECT_EQ(p.out.f32()[h * d + r], p.q.f32()[heads * r + h * (d - r)]) << "head " << h;
  }
}

TEST_F(OpGradientTest, Embedding) {
  const int64_t vocab = 6, cols = 7, n = 15;  // ids repeat
  Tensor ids = Ids({n}, vocab), table = Random({vocab, cols}), out = Zeros({n, cols});
  Tensor dtable = Zeros({vocab, cols}), dout = Zeros({n, cols});
  Check("embedding", [&] { backend_.EmbeddingForward({ids, table, out}); },
        [&] { backend_.EmbeddingBackward({ids, dout, dtable}); }, {{out, dout}},
        {{table, dtable}});
}

TEST_F(OpGradientTest, CrossEntropy) {
  for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{5, 7}, {40, 501}}) {
    CrossEntropyParams p;
    p.logits = Random({rows, vocab}, -3, 3), p.targets = Ids({rows}, vocab);
    p.losses = Zeros({rows}), p.lse = Zeros({rows});
    Tensor dlogits = Zeros({rows, vocab}), dlosses = Zeros({rows});
    Check("cross_entropy", [&] { backend_.CrossEntropyForward(p); },
          [&] {
            backend_.CrossEntropyBackward({p.logits, p.targets, p.lse, dlosses, dlogits});
          },
          {{p.losses, dlosses}}, {{p.logits, dlogits}});
  }
}

// On the tape, logits read by nothing but the loss become their own
// gradient (Tape::GradToOverwrite); a second reader keeps them, and the
// gradients are the same bits either way.
TEST_F(OpGradientTest, LossGradientTakesTheLogitsMemoryOnlyWhenTheLossIsTheirOneReader) {
  const int64_t rows = 6, in = 5, vocab = 13;
  Tensor x = Random({rows, in}), w = Random({vocab, in}), targets = Ids({rows}, vocab);
  Tensor dw[2] = {Zeros({vocab, in}), Zeros({vocab, in})};
  for (int second_reader = 0; second_reader < 2; ++second_reader) {
    Arena arena(backend_, 1 << 20);
    Tape tape(backend_, arena);
    Var logits = Linear(tape, tape.Input(x), tape.Param(w, dw[second_reader]));
    const std::vector<float> before = Values(tape.value(logits));
    Var loss = Mean(tape, CrossEntropy(tape, logits, tape.Input(targets)));
    if (second_reader) Gelu(tape, logits);  // recorded, never reaches the loss
    tape.Backward(loss);
    const std::vector<float> after = Values(tape.value(logits));
    if (second_reader) {
      EXPECT_EQ(after, before) << "another reader still needs the logits";
    } else {
      EXPECT_NE(after, before) << "the gradient did not take the logits' memory";
      // Each row of the gradient sums to zero: softmax minus a one-hot, scaled.
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v) sum += after[r * vocab + v];
        EXPECT_NEAR(sum, 0.0, 1e-6) << "row " << r;
      }
    }
  }
  EXPECT_EQ(Values(dw[0]), Values(dw[1]));
}

// A product that is first to reach a gradient writes it (beta 0) into
// memory nobody zeroed: the arena is poisoned with NaN beforehand, so adding
// to it instead would spread NaN. The gradients equal those of a clean arena.
TEST_F(OpGradientTest, ProductsWriteFreshGradientsWithoutReadingThem) {
  const int64_t rows = 7, in = 6, hidden = 9, vocab = 11;
  Tensor x = Random({rows, in}), targets = Ids({rows}, vocab);
  Tensor w1 = Random({hidden, in}), w2 = Random({hidden, hidden}), w3 = Random({vocab, hidden});
  std::vector<float> grads[2];
  for (int poisoned = 0; poisoned < 2; ++poisoned) {
    Arena arena(backend_, 1 << 20);
    if (poisoned) {
      backend_.Fill(arena.Allocate({(1 << 20) / 4}), std::numeric_limits<float>::quiet_NaN());
      arena.Reset();
    }
    Tape tape(backend_, arena);
    Tensor d1 = Zeros(w1.shape), d2 = Zeros(w2.shape), d3 = Zeros(w3.shape);
    Var h = Gelu(tape, Linear(tape, tape.Input(x), tape.Param(w1, d1)));
    Var g = Gelu(tape, Matmul(tape, h, tape.Param(w2, d2), false, /*trans_b=*/true));
    Var logits = Linear(tape, g, tape.Param(w3, d3), Var{}, Output::kF32);
    tape.Backward(Mean(tape, CrossEntropy(tape, logits, tape.Input(targets))));
    for (const Tensor& d : {d1, d2, d3}) {
      for (float v : Values(d)) grads[poisoned].push_back(v);
    }
  }
  for (float v : grads[1]) ASSERT_FALSE(std::isnan(v)) << "a fresh gradient was read";
  EXPECT_EQ(grads[1], grads[0]);
}

// With bf16 activations the loss writes the logits' gradient as bf16 (what
// the classifier's products read) and leaves the f32 logits alone.
TEST_F(OpGradientTest, LossGradientIsBf16WhenTheTapeStoresBf16) {
  const int64_t rows = 6, in = 5, vocab = 13;
  Tensor x = Random({rows, in}), w = Random({vocab, in}), targets = Ids({rows}, vocab);
  Tensor dw[2] = {Zeros({vocab, in}), Zeros({vocab, in})};
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    Arena arena(backend_, 1 << 20);
    Tape tape(backend_, arena);
    if (bf16) tape.set_activation_dtype(DType::kBF16);
    Var logits = Linear(tape, tape.Input(x), tape.Param(w, dw[bf16]), Var{}, Output::kF32);
    const std::vector<float> before = Values(tape.value(logits));
    tape.Backward(Mean(tape, CrossEntropy(tape, logits, tape.Input(targets))));
    EXPECT_EQ(tape.Grad(logits).dtype, bf16 ? DType::kBF16 : DType::kF32);
    if (bf16) EXPECT_EQ(Values(tape.value(logits)), before) << "the f32 logits are kept";
  }
  // The same gradient, rounded once to bf16 on its way to the product.
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < vocab * in; ++i) {
    diff += std::pow(dw[1].f32()[i] - dw[0].f32()[i], 2);
    norm += std::pow(dw[0].f32()[i], 2);
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-2);
  EXPECT_GT(diff, 0.0) << "the bf16 gradient was not rounded";
}

}  // namespace
}  // namespace smallem
