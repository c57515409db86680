#include "engine/autograd/ops.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace smallem {
namespace {

DType OutputDType(const Tape& tape, Output output) {
  return output == Output::kF32 ? DType::kF32 : tape.activation_dtype();
}


struct MatmulDims {
  int64_t batch, m, n, k;
};

MatmulDims DimsOf(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const Shape& sa = a.shape;
  const Shape& sb = b.shape;
  CHECK(sa.rank() == sb.rank() && (sa.rank() == 2 || sa.rank() == 3))
      << "matmul of " << sa.ToString() << " and " << sb.ToString();
  const int r = sa.rank();
  const int64_t batch = r == 3 ? sa[0] : 1;
  if (r == 3) CHECK_EQ(sa[0], sb[0]) << "matmul batch";
  const int64_t m = trans_a ? sa[r - 1] : sa[r - 2];
  const int64_t k = trans_a ? sa[r - 2] : sa[r - 1];
  const int64_t kb = trans_b ? sb[r - 1] : sb[r - 2];
  const int64_t n = trans_b ? sb[r - 2] : sb[r - 1];
  CHECK_EQ(k, kb) << "matmul inner dimensions of " << sa.ToString() << " and " << sb.ToString();
  return {batch, m, n, k};
}

// out = alpha·op(a)·op(b) + beta·out over `batch` items.
void Gemm(Backend& be, Tensor a, bool ta, Tensor b, bool tb, Tensor out, int64_t batch,
          int64_t m, int64_t n, int64_t k, float beta) {
  be.Matmul(MatmulParams{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k,
                         .trans_a = ta, .trans_b = tb, .batch = batch,
                         .stride_a = m * k, .stride_b = k * n, .stride_out = m * n,
                         .beta = beta});
}

// Rows [begin, begin + count) of t as a (count, cols) matrix; of a vector,
// its elements [begin, begin + count).
Tensor RowsOf(const Tensor& t, int64_t begin, int64_t count) {
  const bool vector = t.shape.rank() == 1;
  const int64_t cols = vector ? 1 : t.shape.cols();
  return Tensor{.data = static_cast<char*>(t.data) + begin * cols * DTypeSize(t.dtype),
                .shape = vector ? Shape{count} : Shape{count, cols},
                .dtype = t.dtype};
}

// The gradient of v for a rule that adds dy into it: an empty tensor when v
// needs none; when v has no gradient yet, a copy of dy (no zero fill, no
// add) and an empty tensor, or, where the dtypes differ, zeros to add to.
Tensor GradOrCopyOf(Tape& t, Var v, const Tensor& gy) {
  if (!v.valid() || !t.requires_grad(v)) return Tensor{};
  bool fresh = false;
  Tensor g = t.GradToWrite(v, &fresh);
  if (!fresh) return g;
  if (g.dtype == gy.dtype) {
    t.backend().CopyOnDevice(g.data, gy.data, gy.bytes());
    return Tensor{};
  }
  t.backend().Fill(g, 0.0f);
  return g;
}

// Records out = a + b, computed by the caller. The gradient of each input
// is dy: the first input with no gradient yet takes dy's memory
// (Tape::ShareGrad), the other a copy, so a residual add zeroes no buffer;
// where the order of the records allows (Tape::MayShareGradAcross: a
// residual add's branch and stream), both take it and nothing is copied.
Var RecordAdd(Tape& tape, Var a, Var b, Tensor out) {
  // The branch: the input made after the other's last use, the add its only.
  const Var branch = tape.MayShareGradAcross(a, b)   ? a
                     : tape.MayShareGradAcross(b, a) ? b
                                                     : Var{};
  return tape.Record(Op::kAdd, out, {a, b}, [=](Tape& t, Var y) {
    const Tensor gy = t.Grad(y);
    const bool a_shares = a.valid() && t.ShareGrad(y, a);
    const bool both = a_shares && branch.valid() && t.uses(branch) == 1;
    const bool b_shares = (!a_shares || both) && b.valid() && t.ShareGrad(y, b);
    const Tensor ga = a_shares ? Tensor{} : GradOrCopyOf(t, a, gy);
    const Tensor gb = b_shares ? Tensor{} : GradOrCopyOf(t, b, gy);
    if (ga.empty() && gb.empty()) return;
    t.backend().AddBackward(BinaryBackwardParams{.grad_out = gy, .grad_a = ga, .grad_b = gb});
  });
}

// Records the LayerNorm of x whose forward `p` ran: p.x (rows, c) holds the
// value of x, p.out the result, in the shape `shape`.
Var RecordLayerNorm(Tape& tape, Var x, Var gain, Var bias, const NormParams& p,
                    const Shape& shape) {
  const int64_t rows = p.x.shape.rows(), c = p.x.shape.cols();
  return tape.Record(Op::kLayerNorm, p.out.Reshaped(shape), {x, gain, bias}, [=](Tape& t, Var y) {
    t.backend().LayerNormBackward(NormBackwardParams{
        .x = p.x, .gain = p.gain, .mean = p.mean, .rstd = p.rstd,
        .grad_out = t.Grad(y).Reshaped({rows, c}),
        .grad_x = t.requires_grad(x) ? t.Grad(x).Reshaped({rows, c}) : Tensor{},
        .grad_gain = t.GradIfNeeded(gain), .grad_bias = t.GradIfNeeded(bias)});
  });
}

// RecordLayerNorm for RmsNorm.
Var RecordRmsNorm(Tape& tape, Var x, Var gain, const NormParams& p, const Shape& shape) {
  const int64_t rows = p.x.shape.rows(), c = p.x.shape.cols();
  return tape.Record(Op::kRmsNorm, p.out.Reshaped(shape), {x, gain}, [=](Tape& t, Var y) {
    t.backend().RmsNormBackward(NormBackwardParams{
        .x = p.x, .gain = p.gain, .rstd = p.rstd,
        .grad_out = t.Grad(y).Reshaped({rows, c}),
        .grad_x = t.requires_grad(x) ? t.Grad(x).Reshaped({rows, c}) : Tensor{},
        .grad_gain = t.GradIfNeeded(gain)});
  });
}

// The parameters of a norm of x's value (rows, c), or of x + residual's when
// residual is valid, with fresh outputs from the tape's arena.
NormParams NewNormParams(Tape& tape, Var x, Var residual, Var gain, Var bias, bool layer) {
  const Tensor vx = tape.value(x);
  const int64_t rows = vx.shape.rows(), c = vx.shape.cols();
  NormParams p{.x = vx.Reshaped({rows, c}), .gain = tape.value(gain),
               .bias = bias.valid() ? tape.value(bias) : Tensor{},
               .out = tape.NewTensor({rows, c}, tape.activation_dtype()),
               .mean = layer ? tape.NewTensor({rows}) : Tensor{},
               .rstd = tape.NewTensor({rows})};
  if (residual.valid()) {
    const Tensor vr = tape.value(residual);
    // As in Add, only the element counts must agree (and the rows' width).
    CHECK(vr.numel() == vx.numel() && vr.shape.cols() == c)
        << "residual " << vr.shape.ToString() << " for x " << vx.shape.ToString();
    p.residual = vr.Reshaped({rows, c});
    p.sum = tape.NewTensor({rows, c}, vx.dtype);
  }
  return p;
}

}  // namespace

Var Matmul(Tape& tape, Var a, Var b, bool trans_a, bool trans_b, Output output) {
  const Tensor& va = tape.value(a);
  const Tensor& vb = tape.value(b);
  const MatmulDims d = DimsOf(va, vb, trans_a, trans_b);
  const DType dtype = OutputDType(tape, output);
  Tensor out = va.shape.rank() == 3 ? tape.NewTensor({d.batch, d.m, d.n}, dtype)
                                    : tape.NewTensor({d.m, d.n}, dtype);
  Gemm(tape.backend(), va, trans_a, vb, trans_b, out, d.batch, d.m, d.n, d.k, 0.0f);
  return tape.Record(Op::kMatmul, out, {a, b}, [=](Tape& t, Var y) {
    Tensor gy = t.Grad(y);
    // C = op(A)·op(B). dop(A) = dC·op(B)ᵀ, dop(B) = op(A)ᵀ·dC, transposed
    // back when the operand was used transposed. A gradient this product is
    // the first to reach is written (beta 0), else added to.
    bool fresh = false;
    if (t.requires_grad(a)) {
      Tensor ga = t.GradToWrite(a, &fresh);
      const float beta = fresh ? 0.0f : 1.0f;
      if (!trans_a) Gemm(t.backend(), gy, false, vb, !trans_b, ga, d.batch, d.m, d.k, d.n, beta);
      else Gemm(t.backend(), vb, trans_b, gy, true, ga, d.batch, d.k, d.m, d.n, beta);
    }
    if (t.requires_grad(b)) {
      Tensor gb = t.GradToWrite(b, &fresh);
      const float beta = fresh ? 0.0f : 1.0f;
      if (!trans_b) Gemm(t.backend(), va, !trans_a, gy, false, gb, d.batch, d.k, d.n, d.m, beta);
      else Gemm(t.backend(), gy, true, va, trans_a, gb, d.batch, d.n, d.k, d.m, beta);
    }
  });
}

Var Linear(Tape& tape, Var x, Var w, Var bias, Output output) {
  const Tensor vx = tape.value(x);
  const Tensor vw = tape.value(w);
  CHECK_EQ(vx.shape.cols(), vw.shape[1]) << "linear input width";
  const int64_t rows = vx.shape.rows(), in = vw.shape[1], outw = vw.shape[0];
  Shape out_shape = vx.shape;
  out_shape[out_shape.rank() - 1] = outw;
  Tensor out = tape.NewTensor(out_shape, OutputDType(tape, output));
  Backend& be = tape.backend();
  Gemm(be, vx, false, vw, true, out, 1, rows, outw, in, 0.0f);
  if (bias.valid()) be.BiasAdd(BiasAddParams{.x = out.Reshaped({rows, outw}), .bias = tape.value(bias)});
  return tape.Record(Op::kMatmul, out, {x, w, bias}, [=](Tape& t, Var y) {
    Tensor gy = t.Grad(y);
    Backend& b = t.backend();
    // Written when this product is the first to reach x's gradient (beta 0).
    bool fresh = false;
    if (t.requires_grad(x)) {
      Tensor gx = t.GradToWrite(x, &fresh);
      Gemm(b, gy, false, vw, false, gx, 1, rows, in, outw, fresh ? 0.0f : 1.0f);
    }
    if (t.requires_grad(w)) {
      Tensor gw = t.GradToWrite(w, &fresh);
      Gemm(b, gy, true, vx, false, gw, 1, outw, in, rows, fresh ? 0.0f : 1.0f);
    }
    if (bias.valid() && t.requires_grad(bias)) {
      b.BiasBackward(BiasBackwardParams{.grad_out = gy.Reshaped({rows, outw}),
                                        .grad_bias = t.Grad(bias)});
    }
  });
}

Var Add(Tape& tape, Var a, Var b) {
  const Tensor va = tape.value(a), vb = tape.value(b);
  CHECK_EQ(va.numel(), vb.numel()) << "add";
  Tensor out = tape.NewTensor(va.shape, va.dtype);
  tape.backend().Add(BinaryParams{.a = va, .b = vb, .out = out});
  return RecordAdd(tape, a, b, out);
}

Var Mul(Tape& tape, Var a, Var b) {
  const Tensor va = tape.value(a), vb = tape.value(b);
  CHECK_EQ(va.numel(), vb.numel()) << "mul";
  Tensor out = tape.NewTensor(va.shape, va.dtype);
  tape.backend().Mul(BinaryParams{.a = va, .b = vb, .out = out});
  return tape.Record(Op::kMul, out, {a, b}, [=](Tape& t, Var y) {
    t.backend().MulBackward(BinaryBackwardParams{.a = va, .b = vb, .grad_out = t.Grad(y),
                                                 .grad_a = t.GradIfNeeded(a),
                                                 .grad_b = t.GradIfNeeded(b)});
  });
}

Var Gelu(Tape& tape, Var x) {
  const Tensor vx = tape.value(x);
  Tensor out = tape.NewTensor(vx.shape, vx.dtype);
  tape.backend().GeluForward(UnaryParams{.in = vx, .out = out});
  return tape.Record(Op::kGelu, out, {x}, [=](Tape& t, Var y) {
    t.backend().GeluBackward(UnaryBackwardParams{.in = vx, .grad_out = t.Grad(y), .grad_in = t.Grad(x)});
  });
}

Var BiasGelu(Tape& tape, Var x, Var bias) {
  const Tensor vx = tape.value(x);
  const int64_t rows = vx.shape.rows(), cols = vx.shape.cols();
  const Tensor vb = bias.valid() ? tape.value(bias) : Tensor{};
  Tensor out = tape.NewTensor(vx.shape, vx.dtype);
  tape.backend().BiasGeluForward(BiasGeluParams{
      .x = vx.Reshaped({rows, cols}), .bias = vb, .out = out.Reshaped({rows, cols})});
  return tape.Record(Op::kBiasGelu, out, {x, bias}, [=](Tape& t, Var y) {
    bool fresh = false;
    const Tensor gx = t.requires_grad(x) ? t.GradToWrite(x, &fresh) : Tensor{};
    t.backend().BiasGeluBackward(BiasGeluBackwardParams{
        .x = vx.Reshaped({rows, cols}), .bias = vb,
        .grad_out = t.Grad(y).Reshaped({rows, cols}),
        .grad_x = gx.empty() ? Tensor{} : gx.Reshaped({rows, cols}),
        .grad_bias = t.GradIfNeeded(bias), .overwrite = fresh});
  });
}

Var SwiGlu(Tape& tape, Var gate, Var up) {
  const Tensor vg = tape.value(gate), vu = tape.value(up);
  CHECK(vg.shape == vu.shape) << "swiglu gate " << vg.shape.ToString() << " up " << vu.shape.ToString();
  Tensor out = tape.NewTensor(vg.shape, vg.dtype);
  tape.backend().SwiGluForward(SwiGluParams{.gate = vg, .up = vu, .out = out});
  return tape.Record(Op::kSwiGlu, out, {gate, up}, [=](Tape& t, Var y) {
    // Fresh gradients for both inputs are written, not zeroed and added to.
    bool fresh_gate = false, fresh_up = false;
    const Tensor gg = t.requires_grad(gate) ? t.GradToWrite(gate, &fresh_gate) : Tensor{};
    const Tensor gu = t.requires_grad(up) ? t.GradToWrite(up, &fresh_up) : Tensor{};
    const bool overwrite = (gg.empty() || fresh_gate) && (gu.empty() || fresh_up);
    if (!overwrite) {
      if (fresh_gate) t.backend().Fill(gg, 0.0f);
      if (fresh_up) t.backend().Fill(gu, 0.0f);
    }
    t.backend().SwiGluBackward(SwiGluBackwardParams{.gate = vg, .up = vu, .grad_out = t.Grad(y),
                                                    .grad_gate = gg, .grad_up = gu,
                                                    .overwrite = overwrite});
  });
}

Var LayerNorm(Tape& tape, Var x, Var gain, Var bias) {
  const NormParams p = NewNormParams(tape, x, Var{}, gain, bias, /*layer=*/true);
  tape.backend().LayerNormForward(p);
  return RecordLayerNorm(tape, x, gain, bias, p, tape.value(x).shape);
}

Var RmsNorm(Tape& tape, Var x, Var gain) {
  const NormParams p = NewNormParams(tape, x, Var{}, gain, Var{}, /*layer=*/false);
  tape.backend().RmsNormForward(p);
  return RecordRmsNorm(tape, x, gain, p, tape.value(x).shape);
}

NormedSum AddLayerNorm(Tape& tape, Var x, Var residual, Var gain, Var bias) {
  NormParams p = NewNormParams(tape, x, residual, gain, bias, /*layer=*/true);
  tape.backend().LayerNormForward(p);
  const Shape shape = tape.value(x).shape;
  const Var sum = RecordAdd(tape, x, residual, p.sum.Reshaped(shape));
  // The norm's input, for its backward, is the sum.
  p.x = p.sum;
  return {.sum = sum, .normed = RecordLayerNorm(tape, sum, gain, bias, p, shape)};
}

NormedSum AddRmsNorm(Tape& tape, Var x, Var residual, Var gain) {
  NormParams p = NewNormParams(tape, x, residual, gain, Var{}, /*layer=*/false);
  tape.backend().RmsNormForward(p);
  const Shape shape = tape.value(x).shape;
  const Var sum = RecordAdd(tape, x, residual, p.sum.Reshaped(shape));
  p.x = p.sum;
  return {.sum = sum, .normed = RecordRmsNorm(tape, sum, gain, p, shape)};
}

Var Rope(Tape& tape, Var x, const RopeTables& tables, int64_t time, int64_t head_dim,
         int64_t rotate_channels, int64_t offset) {
  const Tensor vx = tape.value(x);
  Tensor out = tape.NewTensor(vx.shape, vx.dtype);
  tape.backend().RopeForward(RopeParams{.x = vx, .out = out, .cos = tables.cos, .sin = tables.sin,
                                        .time = time, .head_dim = head_dim,
                                        .rotate_channels = rotate_channels,
                                        .position_offset = offset});
  return tape.Record(Op::kRope, out, {x}, [=](Tape& t, Var y) {
    bool fresh = false;  // a first gradient for x is written, not added to zeros
    const Tensor grad_in = t.GradToWrite(x, &fresh);
    t.backend().RopeBackward(RopeBackwardParams{
        .grad_out = t.Grad(y), .grad_in = grad_in, .cos = tables.cos, .sin = tables.sin,
        .time = time, .head_dim = head_dim, .rotate_channels = rotate_channels,
        .position_offset = offset, .overwrite = fresh});
  });
}

Var Attention(Tape& tape, Var qkv, int64_t batch, int64_t time, int64_t heads) {
  const Tensor v = tape.value(qkv);
  const int64_t c = v.shape.cols() / 3;
  CHECK_EQ(v.numel(), batch * time * 3 * c) << "attention qkv " << v.shape.ToString();
  CHECK_EQ(c % heads, 0) << "attention heads";
  // The softmax is kept for the backward only when there will be one.
  const bool save_probs =
      tape.grad_enabled() && tape.backend().SavesAttentionProbs(batch, heads, time);
  AttentionParams p{.qkv = v, .out = tape.NewTensor({batch, time, c}, v.dtype),
                    .lse = tape.NewTensor({batch, heads, time}),
                    .probs = save_probs ? tape.NewTensor({batch, heads, time, time}) : Tensor{},
                    .batch = batch, .time = time, .heads = heads, .head_dim = c / heads};
  tape.backend().AttentionForward(p);
  return tape.Record(Op::kAttention, p.out, {qkv}, [=](Tape& t, Var y) {
    // A first gradient for qkv is written, not added to zeros (3C wide: the
    // step's largest zero fill otherwise).
    bool fresh = false;
    const Tensor grad_qkv = t.GradToWrite(qkv, &fresh);
    t.backend().AttentionBackward(AttentionBackwardParams{
        .qkv = p.qkv, .out = p.out, .lse = p.lse, .probs = p.probs, .grad_out = t.Grad(y),
        .grad_qkv = grad_qkv, .batch = p.batch, .time = p.time, .heads = p.heads,
        .head_dim = p.head_dim, .overwrite = fresh});
  });
}

Var LatentQkv(Tape& tape, Var q, Var kv, Var k_rope, int64_t heads, int64_t head_dim,
              int64_t rope_dim) {
  const Tensor vq = tape.value(q);
  const int64_t rows = vq.numel() / (heads * head_dim);
  LatentQkvParams p{.q = vq, .kv = tape.value(kv), .k_rope = tape.value(k_rope),
                    .out = tape.NewTensor({rows, 3 * heads * head_dim}, vq.dtype),
                    .heads = heads, .head_dim = head_dim, .rope_dim = rope_dim};
  tape.backend().LatentQkvForward(p);
  return tape.Record(Op::kLatentQkv, p.out, {q, kv, k_rope}, [=](Tape& t, Var y) {
    auto grad = [&t](Var v) { return t.requires_grad(v) ? t.Grad(v) : Tensor{}; };
    t.backend().LatentQkvBackward(LatentQkvBackwardParams{
        .grad_out = t.Grad(y), .grad_q = grad(q), .grad_kv = grad(kv),
        .grad_k_rope = grad(k_rope), .heads = heads, .head_dim = head_dim,
        .rope_dim = rope_dim});
  });
}

Var Embedding(Tape& tape, Var ids, Var table) {
  const Tensor vi = tape.value(ids), vt = tape.value(table);
  CHECK(vi.dtype == DType::kI32) << "embedding ids must be i32";
  Tensor out = tape.NewTensor({vi.numel(), vt.shape[1]});
  tape.backend().EmbeddingForward(EmbeddingParams{.ids = vi, .table = vt, .out = out});
  return tape.Record(Op::kEmbedding, out, {ids, table}, [=](Tape& t, Var y) {
    t.backend().EmbeddingBackward(EmbeddingBackwardParams{
        .ids = vi, .grad_out = t.Grad(y), .grad_table = t.Grad(table)});
  });
}

Var CrossEntropy(Tape& tape, Var logits, Var targets) {
  const Tensor vl = tape.value(logits), vt = tape.value(targets);
  const int64_t rows = vl.shape.rows();
  CHECK_EQ(vt.numel(), rows) << "one target per row";
  CrossEntropyParams p{.logits = vl.Reshaped({rows, vl.shape.cols()}), .targets = vt,
                       .losses = tape.NewTensor({rows}), .lse = tape.NewTensor({rows})};
  tape.backend().CrossEntropyForward(p);
  return tape.Record(Op::kCrossEntropy, p.losses, {logits, targets}, [=](Tape& t, Var y) {
    // The logits are read last here: their gradient is written, not added,
    // in their own memory (f32) or, in the speed mode, as the bf16 the
    // products that read it want.
    Tensor fresh = t.GradToOverwrite(logits, t.activation_dtype());
    const bool overwrite = !fresh.empty();
    t.backend().CrossEntropyBackward(CrossEntropyBackwardParams{
        .logits = p.logits, .targets = p.targets, .lse = p.lse, .grad_losses = t.Grad(y),
        .grad_logits = (overwrite ? fresh : t.Grad(logits)).Reshaped(p.logits.shape),
        .overwrite = overwrite});
  });
}

Var Mean(Tape& tape, Var x) {
  const Tensor vx = tape.value(x);
  Tensor out = tape.NewTensor({1});
  tape.backend().Sum(ReduceParams{.in = vx, .out = out});
  // The sum's scale is applied on the device by a second Sum-free path: the
  // backward fills 1/n; the forward value is rescaled here by a 1-element
  // product so no scalar is read back.
  Tensor scale = tape.NewTensor({1});
  tape.backend().Fill(scale, 1.0f / static_cast<float>(vx.numel()));
  tape.backend().Mul(BinaryParams{.a = out, .b = scale, .out = out});
  return tape.Record(Op::kSum, out, {x}, [=](Tape& t, Var y) {
    // d mean / dx_i = 1/n times the upstream scalar, broadcast.
    Tensor gx = t.Grad(x);
    Tensor ones = t.NewTensor(vx.shape);
    t.backend().Fill(ones, 1.0f / static_cast<float>(vx.numel()));
    Tensor gy = t.Grad(y);
    // gx += ones · gy (gy is a scalar): a rank-1 update as a 1-column GEMM.
    t.backend().Matmul(MatmulParams{.a = ones.Reshaped({vx.numel(), 1}), .b = gy.Reshaped({1, 1}),
                                    .out = gx.Reshaped({vx.numel(), 1}), .m = vx.numel(), .n = 1,
                                    .k = 1, .beta = 1.0f});
  });
}

Var HeadLoss(Tape& tape, Var x, Var table, Var targets, Tensor mask, int64_t chunk_rows) {
  const Tensor vx = tape.value(x), vt = tape.value(table);
  const int64_t n = vx.shape.rows(), c = vx.shape.cols(), v = vt.shape.rows();
  CHECK_EQ(vt.shape.cols(), c) << "head width";
  CHECK_EQ(tape.value(targets).numel(), n) << "one target per row";
  const Tensor ids = tape.value(targets).Reshaped({n});
  Backend& be = tape.backend();
  const int64_t rows = std::min(n, chunk_rows != 0 ? chunk_rows : be.HeadLossChunkRows(n, v, c));
  if (rows <= 0 || !tape.grad_enabled() || vx.dtype != DType::kF32) {
    Var losses = CrossEntropy(tape, Linear(tape, x, table, Var{}, Output::kF32), targets);
    if (!mask.empty()) losses = Mul(tape, losses, tape.Input(mask));
    return Mean(tape, losses);
  }
  // Row n's weight in the loss, and so the gradient its loss gets: m_n / N.
  const Tensor weights = tape.NewTensor({n});
  be.Fill(weights, 1.0f / static_cast<float>(n));
  if (!mask.empty()) be.Mul(BinaryParams{.a = mask, .b = weights, .out = weights});
  const Tensor losses = tape.NewTensor({n}), lse = tape.NewTensor({n});
  const Tensor logits = tape.NewTensor({rows, v});
  // Rows of logits per group of the loss: 256 KiB, well inside any L2.
  const int64_t group = std::clamp<int64_t>((int64_t{256} << 10) / (v * 4), 1, rows);
  // The loss's gradients at a unit upstream gradient; the backward scales.
  const Tensor dx = tape.NewTensor({n, c}), dtable = tape.NewTensor({v, c});
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t r = std::min(rows, n - r0);
    const Tensor xc = RowsOf(vx, r0, r), lc = RowsOf(logits, 0, r), tc = RowsOf(ids, r0, r);
    const Tensor lse_c = RowsOf(lse, r0, r);
    Gemm(be, xc, false, vt, true, lc, 1, r, v, c, 0.0f);
    // The loss and its gradient a group of rows at a time, so that the
    // gradient reads the logits from cache even when the chunk's do not fit.
    for (int64_t g0 = 0; g0 < r; g0 += group) {
      const int64_t g = std::min(group, r - g0);
      const Tensor lg = RowsOf(lc, g0, g), tg = RowsOf(tc, g0, g), lse_g = RowsOf(lse_c, g0, g);
      be.CrossEntropyForward(CrossEntropyParams{
          .logits = lg, .targets = tg, .losses = RowsOf(losses, r0 + g0, g), .lse = lse_g});
      be.CrossEntropyBackward(CrossEntropyBackwardParams{
          .logits = lg, .targets = tg, .lse = lse_g, .grad_losses = RowsOf(weights, r0 + g0, g),
          .grad_logits = lg, .overwrite = true});
    }
    Gemm(be, lc, false, vt, false, RowsOf(dx, r0, r), 1, r, c, v, 0.0f);
    Gemm(be, lc, true, xc, false, dtable, 1, v, c, r, r0 == 0 ? 0.0f : 1.0f);
  }
  // loss = weightsᵀ·losses, a (1, N)·(N, 1) product.
  const Tensor loss = tape.NewTensor({1});
  Gemm(be, weights.Reshaped({1, n}), false, losses.Reshaped({n, 1}), false, loss, 1, 1, 1, n,
       0.0f);
  return tape.Record(Op::kCrossEntropy, loss, {x, table, targets}, [=](Tape& t, Var y) {
    // grad += the loss's gradient × the kept gradient, a (1, 1)·(1, K)
    // product: OpenBLAS runs the (K, 1)·(1, 1) form so slowly that the
    // chunked loss lost to one chunk with it.
    const Tensor gy = t.Grad(y).Reshaped({1, 1});
    for (auto [var, kept] : {std::pair{x, dx}, std::pair{table, dtable}}) {
      if (!t.requires_grad(var)) continue;
      bool fresh = false;
      const Tensor g = t.GradToWrite(var, &fresh);
      Gemm(t.backend(), gy, false, kept.Reshaped({1, kept.numel()}), false,
           g.Reshaped({1, kept.numel()}), 1, 1, kept.numel(), 1, fresh ? 0.0f : 1.0f);
    }
  });
}

Var ShareKv(Tape& tape, Var q, Var source) {
  const Tensor vq = tape.value(q), vs = tape.value(source);
  const int64_t rows = vq.shape.rows(), c = vq.shape.cols();
  CHECK_EQ(vs.numel(), rows * 3 * c) << "share_kv source " << vs.shape.ToString() << " for q "
                                     << vq.shape.ToString();
  Tensor out = tape.NewTensor({rows, 3 * c}, vq.dtype);
  tape.backend().ShareKvForward(
      ShareKvParams{.q = vq.Reshaped({rows, c}), .source = vs.Reshaped({rows, 3 * c}),
                    .out = out});
  return tape.Record(Op::kShareKv, out, {q, source}, [=](Tape& t, Var y) {
    Tensor grad_q = t.GradIfNeeded(q), grad_source = t.GradIfNeeded(source);
    t.backend().ShareKvBackward(ShareKvBackwardParams{
        .grad_out = t.Grad(y),
        .grad_q = grad_q.empty() ? grad_q : grad_q.Reshaped({rows, c}),
        .grad_source = grad_source.empty() ? grad_source : grad_source.Reshaped({rows, 3 * c})});
  });
}

}  // namespace smallem
