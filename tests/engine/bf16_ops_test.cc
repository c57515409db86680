// bf16 activations on the CPU reference (engine/cpu/bf16_ops.h): every op
// with [act] operands, given some of them in bf16, must compute exactly the
// f32 op on the same values with its bf16 outputs rounded once — bit for
// bit, since both runs make the same f32 arithmetic. A model whose tape
// stores activations in bf16 must stay close to the f32 one and train.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/bf16.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/random.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

TEST(Bf16Test, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(RoundToBf16(1.0f), 1.0f);
  // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties go to the even 1.
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f), 1.0f);
  // 1 + 3·2⁻⁸ is halfway between 1 + 2⁻⁷ (odd) and 1 + 2⁻⁶ (even).
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(RoundToBf16(-3.0f), -3.0f);
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(RoundToBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0xc040), -3.0f);
}

class Bf16OpTest : public testing::CpuOpTest {
 protected:
  // One operand in two storages holding the same values: `f32` for the
  // reference run, `stored` (bf16 or f32) for the run under test.
  struct Operand {
    Tensor f32, stored;
  };

  // Random values that bf16 holds exactly, so both runs start equal.
  Operand Make(Shape shape, bool bf16, float lo = -1.0f, float hi = 1.0f) {
    Operand o{.f32 = Random(shape, lo, hi)};
    for (int64_t i = 0; i < o.f32.numel(); ++i) o.f32.f32()[i] = RoundToBf16(o.f32.f32()[i]);
    o.stored = Zeros(shape, bf16 ? DType::kBF16 : DType::kF32);
    for (int64_t i = 0; i < o.f32.numel(); ++i) Set(o.stored, i, o.f32.f32()[i]);
    return o;
  }

  // Rounds the reference's values as the stored operand holds them, before
  // the operand is the input of another op.
  static void Settle(Operand& o) {
    if (o.stored.dtype != DType::kBF16) return;
    for (int64_t i = 0; i < o.f32.numel(); ++i) o.f32.f32()[i] = RoundToBf16(o.f32.f32()[i]);
  }

  static float Get(const Tensor& t, int64_t i) {
    return t.dtype == DType::kBF16 ? Bf16ToFloat(static_cast<const uint16_t*>(t.data)[i])
                                   : t.f32()[i];
  }
  static void Set(const Tensor& t, int64_t i, float v) {
    if (t.dtype == DType::kBF16) {
      static_cast<uint16_t*>(t.data)[i] = FloatToBf16(v);
    } else {
      t.f32()[i] = v;
    }
  }

  // After both runs: the stored operand holds the reference's values,
  // rounded once when it is bf16.
  static void ExpectSame(const Operand& o, const std::string& what) {
    const bool bf16 = o.stored.dtype == DType::kBF16;
    int64_t changed = 0;
    for (int64_t i = 0; i < o.f32.numel(); ++i) {
      const float want = bf16 ? RoundToBf16(o.f32.f32()[i]) : o.f32.f32()[i];
      ASSERT_EQ(Get(o.stored, i), want) << what << " at " << i;
      changed += want != 0.0f;
    }
    EXPECT_GT(changed, 0) << what << " is all zeros: the case tests nothing";
  }
};

TEST_F(Bf16OpTest, ElementwiseOpsRoundTheirF32Results) {
  const Shape s{5, 37};
  Operand in = Make(s, true), out = Make(s, true), grad_out = Make(s, true);
  Operand grad_in = Make(s, true);
  backend_.GeluForward({.in = in.f32, .out = out.f32});
  backend_.GeluForward({.in = in.stored, .out = out.stored});
  ExpectSame(out, "gelu");
  backend_.GeluBackward({.in = in.f32, .grad_out = grad_out.f32, .grad_in = grad_in.f32});
  backend_.GeluBackward({.in = in.stored, .grad_out = grad_out.stored, .grad_in = grad_in.stored});
  ExpectSame(grad_in, "gelu backward (accumulated)");
  // The other mix: f32 input, bf16 output.
  Operand in32 = Make(s, false), out16 = Make(s, true);
  backend_.SiluForward({.in = in32.f32, .out = out16.f32});
  backend_.SiluForward({.in = in32.stored, .out = out16.stored});
  ExpectSame(out16, "silu");
  Operand silu_grad = Make(s, false);
  backend_.SiluBackward({.in = in.f32, .grad_out = grad_out.f32, .grad_in = silu_grad.f32});
  backend_.SiluBackward({.in = in.stored, .grad_out = grad_out.stored, .grad_in = silu_grad.stored});
  ExpectSame(silu_grad, "silu backward into f32");

  Operand gate = Make(s, true), up = Make(s, false), glu = Make(s, true);
  backend_.SwiGluForward({.gate = gate.f32, .up = up.f32, .out = glu.f32});
  backend_.SwiGluForward({.gate = gate.stored, .up = up.stored, .out = glu.stored});
  ExpectSame(glu, "swiglu");
  Operand grad_gate = Make(s, true), grad_up = Make(s, true);
  backend_.SwiGluBackward({.gate = gate.f32, .up = up.f32, .grad_out = grad_out.f32,
                           .grad_gate = grad_gate.f32, .grad_up = grad_up.f32});
  backend_.SwiGluBackward({.gate = gate.stored, .up = up.stored, .grad_out = grad_out.stored,
                           .grad_gate = grad_gate.stored, .grad_up = grad_up.stored});
  ExpectSame(grad_gate, "swiglu grad_gate");
  ExpectSame(grad_up, "swiglu grad_up");
}

TEST_F(Bf16OpTest, AddAndMulHandleAliasesAndMixedGradients) {
  const Shape s{3, 50};
  // out aliases a, both bf16: the op must read a before the copy is written.
  Operand a = Make(s, true), b = Make(s, false);
  backend_.Add({.a = a.f32, .b = b.f32, .out = a.f32});
  backend_.Add({.a = a.stored, .b = b.stored, .out = a.stored});
  ExpectSame(a, "add in place");
  Operand m = Make(s, true), prod = Make(s, true);
  backend_.Mul({.a = m.f32, .b = b.f32, .out = prod.f32});
  backend_.Mul({.a = m.stored, .b = b.stored, .out = prod.stored});
  ExpectSame(prod, "mul");
  // The model's residual add: f32 stream gradient into an f32 and a bf16 one.
  Operand grad_out = Make(s, false), grad_a = Make(s, false), grad_b = Make(s, true);
  backend_.AddBackward({.grad_out = grad_out.f32, .grad_a = grad_a.f32, .grad_b = grad_b.f32});
  backend_.AddBackward(
      {.grad_out = grad_out.stored, .grad_a = grad_a.stored, .grad_b = grad_b.stored});
  ExpectSame(grad_a, "add grad_a");
  ExpectSame(grad_b, "add grad_b");
  Operand mga = Make(s, true), mgb = Make(s, false);
  backend_.MulBackward({.a = m.f32, .b = b.f32, .grad_out = grad_out.f32, .grad_a = mga.f32,
                        .grad_b = mgb.f32});
  backend_.MulBackward({.a = m.stored, .b = b.stored, .grad_out = grad_out.stored,
                        .grad_a = mga.stored, .grad_b = mgb.stored});
  ExpectSame(mga, "mul grad_a");
  ExpectSame(mgb, "mul grad_b");
}

TEST_F(Bf16OpTest, AccumulationAddsInF32AndRoundsOnce) {
  // bf16 spacing at 1 is 2⁻⁷ = 4·2⁻⁹: 1 + 3·2⁻⁹ rounds up to 1 + 2⁻⁷, and a
  // quarter of the spacing added to that is lost.
  Tensor grad = Zeros({1}, DType::kBF16);
  Set(grad, 0, 1.0f);
  Tensor g = FromValues({1}, {3 * 0x1p-9f});
  backend_.AddBackward({.grad_out = g, .grad_a = grad});
  EXPECT_EQ(Get(grad, 0), 1.0f + 0x1p-7f);
  Tensor small = FromValues({1}, {0x1p-9f});
  backend_.AddBackward({.grad_out = small, .grad_a = grad});
  EXPECT_EQ(Get(grad, 0), 1.0f + 0x1p-7f) << "a contribution under half an ulp is lost";
}

TEST_F(Bf16OpTest, MatmulWithBf16OperandsAndAnAccumulatedBf16Output) {
  const int64_t m = 7, n = 9, k = 13;
  Operand a = Make({m, k}, true), b = Make({n, k}, false), out = Make({m, n}, true);
  for (float beta : {0.0f, 1.0f}) {
    backend_.Matmul({.a = a.f32, .b = b.f32, .out = out.f32, .m = m, .n = n, .k = k,
                     .trans_b = true, .beta = beta});
    backend_.Matmul({.a = a.stored, .b = b.stored, .out = out.stored, .m = m, .n = n, .k = k,
                     .trans_b = true, .beta = beta});
    ExpectSame(out, beta == 0 ? "matmul" : "matmul, beta 1");
    Settle(out);
  }
  // Batched, strided, both inputs bf16, f32 out (a weight gradient).
  Operand x = Make({2, k, m}, true), y = Make({2, k, n}, true), w = Make({2, m, n}, false);
  const MatmulParams batched{.m = m, .n = n, .k = k, .trans_a = true, .batch = 2,
                             .stride_a = k * m, .stride_b = k * n, .stride_out = m * n,
                             .beta = 1.0f};
  MatmulParams ref = batched, test = batched;
  ref.a = x.f32, ref.b = y.f32, ref.out = w.f32;
  test.a = x.stored, test.b = y.stored, test.out = w.stored;
  backend_.Matmul(ref);
  backend_.Matmul(test);
  ExpectSame(w, "batched matmul");
}

// Found by the emulated device's parity suite: with beta 0, the widened copy
// of a bf16 out was written back whole, so the gaps between batch items came
// back as zeros instead of untouched.
TEST_F(Bf16OpTest, MatmulIntoABf16OutWithGapsBetweenItemsLeavesTheGapsAlone) {
  const int64_t m = 3, n = 4, k = 5, gap = 6, batch = 2;
  Operand a = Make({batch, m * k}, true), b = Make({batch, k * n}, true);
  Operand out = Make({batch, m * n + gap}, true);
  const MatmulParams params{.m = m, .n = n, .k = k, .batch = batch, .stride_a = m * k,
                            .stride_b = k * n, .stride_out = m * n + gap, .beta = 0.0f};
  MatmulParams ref = params, test = params;
  ref.a = a.f32, ref.b = b.f32, ref.out = out.f32;
  test.a = a.stored, test.b = b.stored, test.out = out.stored;
  backend_.Matmul(ref);
  backend_.Matmul(test);
  ExpectSame(out, "matmul into a bf16 out with gaps");
}

// Also found there: a bf16 a and b of no elements (k = 0) were widened into
// copies with no address, which the matmul's checks refuse as absent.
TEST_F(Bf16OpTest, AnEmptyInnerDimensionWithBf16OperandsScalesOut) {
  const int64_t m = 3, n = 4;
  Tensor a = Zeros({m, 0}, DType::kBF16), b = Zeros({0, n}, DType::kBF16);
  Operand out = Make({m, n}, true);
  backend_.Matmul({.a = a, .b = b, .out = out.stored, .m = m, .n = n, .k = 0, .beta = 0.5f});
  for (int64_t i = 0; i < m * n; ++i) out.f32.f32()[i] *= 0.5f;
  ExpectSame(out, "matmul with k = 0");
}

TEST_F(Bf16OpTest, NormsTakeTheModelsMixOfStreamAndActivations) {
  const int64_t rows = 6, c = 40;
  for (bool layer : {true, false}) {
    const std::string name = layer ? "layer norm" : "rms norm";
    // The residual add: x and sum f32 (the stream), residual and out bf16.
    Operand x = Make({rows, c}, false), residual = Make({rows, c}, true);
    Operand sum = Make({rows, c}, false), out = Make({rows, c}, true);
    Tensor gain = Random({c}, 0.5f, 1.5f), bias = layer ? Random({c}) : Tensor{};
    Tensor mean = layer ? Zeros({rows}) : Tensor{}, rstd = Zeros({rows});
    auto forward = [&](const NormParams& p) {
      layer ? backend_.LayerNormForward(p) : backend_.RmsNormForward(p);
    };
    forward({.x = x.f32, .gain = gain, .bias = bias, .out = out.f32, .mean = mean, .rstd = rstd,
             .residual = residual.f32, .sum = sum.f32});
    forward({.x = x.stored, .gain = gain, .bias = bias, .out = out.stored, .mean = mean,
             .rstd = rstd, .residual = residual.stored, .sum = sum.stored});
    ExpectSame(sum, name + " sum");
    ExpectSame(out, name + " out");
    // The backward: x (the sum) f32, grad_out bf16, grad_x f32.
    Operand grad_out = Make({rows, c}, true), grad_x = Make({rows, c}, false);
    Tensor grad_gain = Zeros({c}), grad_bias = layer ? Zeros({c}) : Tensor{};
    auto backward = [&](const NormBackwardParams& p) {
      layer ? backend_.LayerNormBackward(p) : backend_.RmsNormBackward(p);
    };
    backward({.x = sum.f32, .gain = gain, .mean = mean, .rstd = rstd, .grad_out = grad_out.f32,
              .grad_x = grad_x.f32, .grad_gain = Zeros({c}),
              .grad_bias = layer ? Zeros({c}) : Tensor{}});
    backward({.x = sum.stored, .gain = gain, .mean = mean, .rstd = rstd,
              .grad_out = grad_out.stored, .grad_x = grad_x.stored, .grad_gain = grad_gain,
              .grad_bias = grad_bias});
    ExpectSame(grad_x, name + " grad_x");

    // Everything bf16: the norm reads the sum as stored, i.e. Add then the
    // norm, each rounding its output.
    Operand x16 = Make({rows, c}, true), sum16 = Make({rows, c}, true);
    Operand out16 = Make({rows, c}, true);
    backend_.Add({.a = x16.f32, .b = residual.f32, .out = sum16.f32});
    Settle(sum16);
    forward({.x = sum16.f32, .gain = gain, .bias = bias, .out = out16.f32, .mean = mean,
             .rstd = rstd});
    forward({.x = x16.stored, .gain = gain, .bias = bias, .out = out16.stored, .mean = mean,
             .rstd = rstd, .residual = residual.stored, .sum = sum16.stored});
    ExpectSame(sum16, name + " bf16 sum");
    ExpectSame(out16, name + " out of the bf16 sum");
  }
}

TEST_F(Bf16OpTest, BiasRopeAndAttentionOnBf16Activations) {
  const int64_t batch = 2, time = 5, heads = 2, d = 8, c = heads * d;
  Operand qkv = Make({batch, time, 3 * c}, true);
  Tensor bias = Random({3 * c});
  backend_.BiasAdd({.x = qkv.f32.Reshaped({batch * time, 3 * c}), .bias = bias});
  backend_.BiasAdd({.x = qkv.stored.Reshaped({batch * time, 3 * c}), .bias = bias});
  ExpectSame(qkv, "bias add in place");
  Settle(qkv);
  Tensor grad_bias_ref = Zeros({3 * c}), grad_bias = Zeros({3 * c});
  backend_.BiasBackward({.grad_out = qkv.f32.Reshaped({batch * time, 3 * c}),
                         .grad_bias = grad_bias_ref});
  backend_.BiasBackward({.grad_out = qkv.stored.Reshaped({batch * time, 3 * c}),
                         .grad_bias = grad_bias});
  EXPECT_EQ(Values(grad_bias), Values(grad_bias_ref)) << "bias backward";

  // Rope in place on the queries and keys.
  Tensor cos = Zeros({time, d / 2}), sin = Zeros({time, d / 2});
  for (int64_t m = 0; m < time; ++m) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = m * std::pow(10000.0, -2.0 * i / d);
      cos.f32()[m * d / 2 + i] = static_cast<float>(std::cos(angle));
      sin.f32()[m * d / 2 + i] = static_cast<float>(std::sin(angle));
    }
  }
  const RopeParams rope{.cos = cos, .sin = sin, .time = time, .head_dim = d,
                        .rotate_channels = 2 * c};
  RopeParams ref = rope, test = rope;
  ref.x = ref.out = qkv.f32;
  test.x = test.out = qkv.stored;
  backend_.RopeForward(ref);
  backend_.RopeForward(test);
  ExpectSame(qkv, "rope in place");
  Settle(qkv);
  Operand grad_rope = Make({batch, time, 3 * c}, true), grad_in = Make({batch, time, 3 * c}, true);
  backend_.RopeBackward({.grad_out = grad_rope.f32, .grad_in = grad_in.f32, .cos = cos,
                         .sin = sin, .time = time, .head_dim = d, .rotate_channels = 2 * c});
  backend_.RopeBackward({.grad_out = grad_rope.stored, .grad_in = grad_in.stored, .cos = cos,
                         .sin = sin, .time = time, .head_dim = d, .rotate_channels = 2 * c});
  ExpectSame(grad_in, "rope backward");

  Operand out = Make({batch, time, c}, true);
  Tensor lse_ref = Zeros({batch, heads, time}), lse = Zeros({batch, heads, time});
  backend_.AttentionForward({.qkv = qkv.f32, .out = out.f32, .lse = lse_ref, .batch = batch,
                             .time = time, .heads = heads, .head_dim = d});
  backend_.AttentionForward({.qkv = qkv.stored, .out = out.stored, .lse = lse, .batch = batch,
                             .time = time, .heads = heads, .head_dim = d});
  ExpectSame(out, "attention");
  EXPECT_EQ(Values(lse), Values(lse_ref)) << "attention lse";
  Settle(out);  // the backward reads the forward's output as stored
  Operand grad_out = Make({batch, time, c}, true), grad_qkv = Make({batch, time, 3 * c}, true);
  backend_.AttentionBackward({.qkv = qkv.f32, .out = out.f32, .lse = lse_ref,
                              .grad_out = grad_out.f32, .grad_qkv = grad_qkv.f32,
                              .batch = batch, .time = time, .heads = heads, .head_dim = d});
  backend_.AttentionBackward({.qkv = qkv.stored, .out = out.stored, .lse = lse,
                              .grad_out = grad_out.stored, .grad_qkv = grad_qkv.stored,
                              .batch = batch, .time = time, .heads = heads, .head_dim = d});
  ExpectSame(grad_qkv, "attention backward");
}

TEST_F(Bf16OpTest, CrossEntropyWritesOrAddsABf16Gradient) {
  const int64_t rows = 5, vocab = 41;
  CrossEntropyParams p{.logits = Random({rows, vocab}, -4, 4), .targets = Ids({rows}, vocab),
                       .losses = Zeros({rows}), .lse = Zeros({rows})};
  backend_.CrossEntropyForward(p);
  Tensor g = Random({rows});
  for (bool overwrite : {true, false}) {
    Operand grad = Make({rows, vocab}, true);
    backend_.CrossEntropyBackward({.logits = p.logits, .targets = p.targets, .lse = p.lse,
                                   .grad_losses = g, .grad_logits = grad.f32,
                                   .overwrite = overwrite});
    backend_.CrossEntropyBackward({.logits = p.logits, .targets = p.targets, .lse = p.lse,
                                   .grad_losses = g, .grad_logits = grad.stored,
                                   .overwrite = overwrite});
    ExpectSame(grad, overwrite ? "cross_entropy backward, written" : "cross_entropy backward");
  }
}

TEST_F(Bf16OpTest, FillWritesBf16) {
  Tensor t = Zeros({9}, DType::kBF16);
  backend_.Fill(t, 1.0f + 0x1p-7f);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(Get(t, i), 1.0f + 0x1p-7f);
}

// The model with bf16 activations: what a GPU in its speed mode stores. The
// config, weights' scale and batch size are those of the GPU model-parity
// tests (tests/gpu/model_parity_test.cc: V 67, T 37, L 2, H 2, C 64, B 3),
// so that what bf16 storage alone costs here is measured against their
// bounds, which must also absorb the bf16 products' own ~3e-3.
ModelConfig ParityConfig(const Architecture& arch) {
  return ModelConfig{.vocab = 67, .context = 37, .layers = 2, .heads = 2, .embed = 64,
                     .architecture = arch};
}

struct ModelRun {
  float loss = 0;
  std::vector<float> logits, grads;
};

ModelRun ForwardBackward(Model& model, DType activations) {
  Backend& be = model.backend();
  constexpr int64_t kBatch = 3, kTime = 37;
  Rng rng(5);
  std::vector<int32_t> in(kBatch * kTime), tg(kBatch * kTime);
  for (int32_t& id : in) id = static_cast<int32_t>(rng.Below(67));
  for (int32_t& id : tg) id = static_cast<int32_t>(rng.Below(67));
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_activation_dtype(activations);
  model.ZeroGrad();
  Var logits = model.Logits(tape, testing::Tokens(arena, be, in), kBatch, kTime);
  Var loss = Mean(tape, CrossEntropy(tape, logits, tape.Input(testing::Tokens(arena, be, tg))));
  ModelRun run;
  run.logits = testing::ToHost(be, tape.value(logits));  // Backward may overwrite them
  tape.Backward(loss);
  be.CopyToHost(&run.loss, tape.value(loss).data, sizeof(float));
  run.grads = testing::ToHost(be, model.grads());
  return run;
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    norm += b[i] * static_cast<double>(b[i]);
  }
  return std::sqrt(diff / norm);
}

// Prints (and bounds) what docs/gpu-notes.md quotes: the speed mode's bounds
// are 1e-2 on the loss and 5e-2 on logits and gradients, norm-wise.
TEST(Bf16ModelTest, Bf16ActivationsLeaveRoomInTheGpuParityBounds) {
  for (const Architecture& arch : {Architecture::Gpt2(), Architecture::Modern()}) {
    CpuBackend be(TestCpuOptions(2));
    auto model = Model::Create(ParityConfig(arch), be);
    ASSERT_TRUE(model.ok());
    testing::Randomize(**model, 5, /*scale=*/0.1);
    const ModelRun f32 = ForwardBackward(**model, DType::kF32);
    const ModelRun bf16 = ForwardBackward(**model, DType::kBF16);
    const double loss = std::fabs(bf16.loss - f32.loss) / f32.loss;
    const double logits = RelativeError(bf16.logits, f32.logits);
    const double grads = RelativeError(bf16.grads, f32.grads);
    const std::string name = arch.norm == NormKind::kRms ? "modern" : "gpt2";
    std::printf("%s: bf16 storage moves the loss by %.1e, logits by %.1e, gradients by %.1e\n",
                name.c_str(), loss, logits, grads);
    EXPECT_GT(loss, 0.0) << name << ": the activations were not stored in bf16";
    EXPECT_LT(loss, 2e-3) << name;
    EXPECT_LT(logits, 2e-2) << name;
    EXPECT_LT(grads, 2e-2) << name;
  }
}

// Losses of `steps` AdamW steps on one batch from the same initialization.
std::vector<float> TrainingLosses(const Architecture& arch, DType activations, int steps) {
  CpuBackend be(TestCpuOptions(2));
  ModelConfig c = testing::TinyConfig(arch);
  c.embed = 32;
  c.heads = 4;
  auto model = Model::Create(c, be);
  CHECK(model.ok()) << model.status();
  (*model)->Initialize(1);
  auto opt = AdamWOptimizer::Create(**model, AdamWOptions{.weight_decay = 0});
  CHECK(opt.ok()) << opt.status();
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 6, 10, 7, 2, 2};
  const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 6, 10, 7, 6, 1, 0};
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_activation_dtype(activations);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    arena.Reset();
    tape.Reset();
    (*model)->ZeroGrad();
    Var loss = Mean(tape, (*model)->Losses(tape, testing::Tokens(arena, be, in),
                                           testing::Tokens(arena, be, tg), 2, 6));
    tape.Backward(loss);
    losses.push_back(0);
    be.CopyToHost(&losses.back(), tape.value(loss).data, sizeof(float));
    (*opt)->Step(1e-2f);
  }
  return losses;
}

TEST(Bf16ModelTest, TwentyTrainingStepsTrackTheF32Run) {
  for (const Architecture& arch : {Architecture::Gpt2(), Architecture::Modern()}) {
    const std::vector<float> f32 = TrainingLosses(arch, DType::kF32, 20);
    const std::vector<float> bf16 = TrainingLosses(arch, DType::kBF16, 20);
    // The runs drift apart as rounding differences compound while the loss
    // falls tenfold: bounded by 2 % of the starting loss.
    for (size_t i = 0; i < f32.size(); ++i) {
      EXPECT_NEAR(bf16[i], f32[i], 2e-2 * f32.front()) << "step " << i;
    }
    EXPECT_LT(bf16.back(), 0.7 * bf16.front()) << "bf16 training learns";
  }
}

TEST(Bf16ModelTest, ActivationsAreBf16WhereTheTapeSaysSoAndLogitsStayF32) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(testing::TinyConfig(Architecture{}), be);
  ASSERT_TRUE(model.ok());
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  EXPECT_EQ(tape.activation_dtype(), DType::kF32) << "the CPU backend's default";
  be.set_activation_dtype(DType::kBF16);
  EXPECT_EQ(Tape(be, arena).activation_dtype(), DType::kBF16) << "a tape takes its backend's";
  tape.set_activation_dtype(DType::kBF16);
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  Var logits = (*model)->Logits(tape, testing::Tokens(arena, be, ids), 1, 5);
  EXPECT_EQ(tape.value(logits).dtype, DType::kF32);
  int bf16 = 0;
  for (int32_t i = 0; i < logits.id; ++i) bf16 += tape.value(Var{i}).dtype == DType::kBF16;
  EXPECT_GE(bf16, 10) << "norms, products, attention and activations of two blocks";
}

}  // namespace
}  // namespace smallem
