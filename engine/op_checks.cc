#include "engine/op_checks.h"

#include <algorithm>
#include <ostream>

#include "base/check.h"

namespace smallem {
namespace {

// An operand's name in messages, "<op>: <operand>", put together only when a
// check fails (the checks run on every call).
struct Operand {
  const char* op;
  const char* name;
};

std::ostream& operator<<(std::ostream& os, const Operand& operand) {
  return os << operand.op << ": " << operand.name;
}

// The checks behind CheckF32, CheckI32 and CheckActivation, for a name that
// is a string or an Operand.
template <typename Name>
void CheckTyped(const Tensor& t, int64_t numel, DType dtype, const char* type_name,
                const Name& what) {
  CHECK(t.data != nullptr) << what << " is empty";
  CHECK(t.dtype == dtype) << what << " must be " << type_name << ", is " << DTypeName(t.dtype);
  CHECK_EQ(t.numel(), numel) << what << " " << t.shape.ToString();
}

template <typename Name>
void CheckF32Named(const Tensor& t, int64_t numel, const Name& what) {
  CheckTyped(t, numel, DType::kF32, "f32", what);
}

template <typename Name>
void CheckActivationNamed(const Tensor& t, int64_t numel, const Name& what) {
  CHECK(t.data != nullptr) << what << " is empty";
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << what << " must be f32 or bf16, is " << DTypeName(t.dtype);
  CHECK_EQ(t.numel(), numel) << what << " " << t.shape.ToString();
}

// What RopeForward and RopeBackward share, on x (forward) or grad_out
// (backward).
void CheckRopeRows(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t time,
                   int64_t head_dim, int64_t rotate_channels, int64_t position_offset,
                   const char* op) {
  CHECK(x.data != nullptr && (x.dtype == DType::kF32 || x.dtype == DType::kBF16))
      << op << ": x must be an f32 or bf16 activation";
  CHECK(head_dim > 0 && head_dim % 2 == 0)
      << op << ": head_dim " << head_dim << " must be positive and even";
  CHECK_GT(time, 0) << op << ": time";
  CHECK_GE(position_offset, 0) << op << ": position_offset";
  const int64_t rows = x.shape.rows(), width = x.shape.cols();
  CHECK(rotate_channels >= 0 && rotate_channels % head_dim == 0 && rotate_channels <= width)
      << op << ": rotate_channels " << rotate_channels << " must be a multiple of head_dim "
      << head_dim << " within the row width " << width;
  CHECK_EQ(cos.shape.cols(), head_dim / 2) << op << ": cos " << cos.shape.ToString();
  CHECK(cos.shape == sin.shape) << op << ": sin " << sin.shape.ToString() << " vs cos "
                                << cos.shape.ToString();
  CheckF32(cos, cos.numel(), "rope: cos");
  CheckF32(sin, sin.numel(), "rope: sin");
  const int64_t last_position = std::min(rows, time) - 1 + position_offset;
  CHECK_LT(last_position, cos.shape.rows()) << op << ": position beyond the cos/sin tables";
}

// What AttentionForward and AttentionBackward share.
void CheckAttentionSizes(const Tensor& qkv, const Tensor& out, int64_t batch, int64_t time,
                         int64_t heads, int64_t head_dim, const char* op) {
  CHECK(batch > 0 && time > 0 && heads > 0 && head_dim > 0)
      << op << ": batch " << batch << ", time " << time << ", heads " << heads
      << ", head_dim " << head_dim << " must be positive";
  const int64_t c = heads * head_dim;
  CheckActivation(qkv, batch * time * 3 * c, "attention: qkv (B, T, 3C)");
  CheckActivation(out, batch * time * c, "attention: out (B, T, C)");
}

}  // namespace

void CheckF32(const Tensor& t, int64_t numel, const char* what) {
  CheckF32Named(t, numel, what);
}

void CheckI32(const Tensor& t, int64_t numel, const char* what) {
  CheckTyped(t, numel, DType::kI32, "i32", what);
}

void CheckActivation(const Tensor& t, int64_t numel, const char* what) {
  CheckActivationNamed(t, numel, what);
}

void CheckAliasSameDType(const Tensor& a, const Tensor& b, const char* what) {
  CHECK(a.data != b.data || a.empty() || a.dtype == b.dtype)
      << what << ": aliased operands must have one dtype, are " << DTypeName(a.dtype) << " and "
      << DTypeName(b.dtype);
}

void CheckMatmul(const MatmulParams& p) {
  CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.batch >= 1)
      << "matmul: m=" << p.m << " n=" << p.n << " k=" << p.k << " batch=" << p.batch;
  for (const Tensor* t : {&p.a, &p.b, &p.out}) {
    CHECK(t->data != nullptr && (t->dtype == DType::kF32 || t->dtype == DType::kBF16))
        << "matmul: a, b and out must be non-empty f32 or bf16 tensors";
  }
  CHECK(p.batch == 1 || p.stride_out != 0)
      << "matmul: a batched output cannot broadcast (stride_out = 0)";
  // The last batch item must end inside each tensor.
  const int64_t last = p.batch - 1;
  CHECK_LE(last * p.stride_a + p.m * p.k, p.a.numel())
      << "matmul: a " << p.a.shape.ToString() << " too small";
  CHECK_LE(last * p.stride_b + p.k * p.n, p.b.numel())
      << "matmul: b " << p.b.shape.ToString() << " too small";
  CHECK_LE(last * p.stride_out + p.m * p.n, p.out.numel())
      << "matmul: out " << p.out.shape.ToString() << " too small";
}

void CheckBinary(const BinaryParams& p, const char* op) {
  const int64_t n = p.out.numel();
  CheckActivationNamed(p.a, n, Operand{op, "a"});
  CheckActivationNamed(p.b, n, Operand{op, "b"});
  CheckActivationNamed(p.out, n, Operand{op, "out"});
  CheckAliasSameDType(p.out, p.a, op);
  CheckAliasSameDType(p.out, p.b, op);
}

void CheckBinaryBackward(const BinaryBackwardParams& p, bool gradients_read_inputs,
                         const char* op) {
  const int64_t n = p.grad_out.numel();
  CheckActivationNamed(p.grad_out, n, Operand{op, "grad_out"});
  if (!p.grad_a.empty()) {
    CheckActivationNamed(p.grad_a, n, Operand{op, "grad_a"});
    if (gradients_read_inputs) CheckActivationNamed(p.b, n, Operand{op, "b"});
  }
  if (!p.grad_b.empty()) {
    CheckActivationNamed(p.grad_b, n, Operand{op, "grad_b"});
    if (gradients_read_inputs) CheckActivationNamed(p.a, n, Operand{op, "a"});
  }
  CheckAliasSameDType(p.grad_a, p.grad_b, op);
}

void CheckUnary(const UnaryParams& p, const char* op) {
  const int64_t n = p.in.numel();
  CheckActivationNamed(p.in, n, Operand{op, "in"});
  CheckActivationNamed(p.out, n, Operand{op, "out"});
  CheckAliasSameDType(p.out, p.in, op);
}

void CheckUnaryBackward(const UnaryBackwardParams& p, const char* op) {
  const int64_t n = p.in.numel();
  CheckActivationNamed(p.in, n, Operand{op, "in"});
  CheckActivationNamed(p.grad_out, n, Operand{op, "grad_out"});
  CheckActivationNamed(p.grad_in, n, Operand{op, "grad_in"});
  CheckAliasSameDType(p.grad_in, p.in, op);
  CheckAliasSameDType(p.grad_in, p.grad_out, op);
}

void CheckSwiGlu(const SwiGluParams& p) {
  const int64_t n = p.gate.numel();
  CheckActivation(p.gate, n, "swiglu: gate");
  CheckActivation(p.up, n, "swiglu: up");
  CheckActivation(p.out, n, "swiglu: out");
  CheckAliasSameDType(p.out, p.gate, "swiglu");
  CheckAliasSameDType(p.out, p.up, "swiglu");
}

void CheckSwiGluBackward(const SwiGluBackwardParams& p) {
  const int64_t n = p.gate.numel();
  CheckActivation(p.gate, n, "swiglu backward: gate");
  CheckActivation(p.up, n, "swiglu backward: up");
  CheckActivation(p.grad_out, n, "swiglu backward: grad_out");
  if (!p.grad_gate.empty()) CheckActivation(p.grad_gate, n, "swiglu backward: grad_gate");
  if (!p.grad_up.empty()) CheckActivation(p.grad_up, n, "swiglu backward: grad_up");
}

void CheckBiasAdd(const BiasAddParams& p) {
  const int64_t cols = p.bias.numel();
  CheckF32(p.bias, cols, "bias_add: bias");
  CHECK_EQ(p.x.shape.cols(), cols) << "bias_add: x " << p.x.shape.ToString();
  CheckActivation(p.x, p.x.numel(), "bias_add: x");
}

void CheckBiasBackward(const BiasBackwardParams& p) {
  const int64_t cols = p.grad_bias.numel();
  CheckF32(p.grad_bias, cols, "bias backward: grad_bias");
  CHECK_EQ(p.grad_out.shape.cols(), cols)
      << "bias backward: grad_out " << p.grad_out.shape.ToString();
  CheckActivation(p.grad_out, p.grad_out.numel(), "bias backward: grad_out");
}

void CheckBiasGelu(const BiasGeluParams& p) {
  const int64_t n = p.x.numel(), cols = p.x.shape.cols();
  if (!p.bias.empty()) CheckF32(p.bias, cols, "bias_gelu: bias");
  CheckActivation(p.x, n, "bias_gelu: x");
  CheckActivation(p.out, n, "bias_gelu: out");
  CheckAliasSameDType(p.out, p.x, "bias_gelu");
}

void CheckBiasGeluBackward(const BiasGeluBackwardParams& p) {
  const int64_t n = p.x.numel(), cols = p.x.shape.cols();
  if (!p.bias.empty()) CheckF32(p.bias, cols, "bias_gelu backward: bias");
  CheckActivation(p.x, n, "bias_gelu backward: x");
  CheckActivation(p.grad_out, n, "bias_gelu backward: grad_out");
  if (!p.grad_x.empty()) {
    CheckActivation(p.grad_x, n, "bias_gelu backward: grad_x");
    CHECK(p.grad_x.data != p.x.data && p.grad_x.data != p.grad_out.data)
        << "bias_gelu backward: grad_x must not alias x or grad_out";
  }
  if (!p.grad_bias.empty()) {
    CheckF32(p.grad_bias, cols, "bias_gelu backward: grad_bias");
    CHECK(!p.bias.empty()) << "bias_gelu backward: grad_bias without a bias";
  }
}

void CheckNorm(const NormParams& p, NormKind kind) {
  const bool layer = kind == NormKind::kLayer;
  const char* op = layer ? "layer_norm" : "rms_norm";
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << op << ": x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivationNamed(p.x, rows * cols, Operand{op, "x"});
  CheckF32Named(p.gain, cols, Operand{op, "gain"});
  CheckActivationNamed(p.out, rows * cols, Operand{op, "out"});
  CHECK_EQ(p.residual.empty(), p.sum.empty()) << op << ": residual and sum go together";
  if (!p.residual.empty()) {
    CheckActivationNamed(p.residual, rows * cols, Operand{op, "residual"});
    CheckActivationNamed(p.sum, rows * cols, Operand{op, "sum"});
    CheckAliasSameDType(p.sum, p.x, op);
    CheckAliasSameDType(p.sum, p.residual, op);
  }
  if (layer && !p.bias.empty()) CheckF32(p.bias, cols, "layer_norm: bias");
  if (layer && !p.mean.empty()) CheckF32(p.mean, rows, "layer_norm: mean");
  if (!p.rstd.empty()) CheckF32Named(p.rstd, rows, Operand{op, "rstd"});
}

void CheckNormBackward(const NormBackwardParams& p, NormKind kind) {
  const bool layer = kind == NormKind::kLayer;
  const char* op = layer ? "layer_norm backward" : "rms_norm backward";
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << op << ": x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivationNamed(p.x, rows * cols, Operand{op, "x"});
  CheckF32Named(p.gain, cols, Operand{op, "gain"});
  if (layer) CheckF32(p.mean, rows, "layer_norm backward: mean");
  CheckF32Named(p.rstd, rows, Operand{op, "rstd"});
  CheckActivationNamed(p.grad_out, rows * cols, Operand{op, "grad_out"});
  if (!p.grad_x.empty()) CheckActivationNamed(p.grad_x, rows * cols, Operand{op, "grad_x"});
  if (!p.grad_gain.empty()) CheckF32Named(p.grad_gain, cols, Operand{op, "grad_gain"});
  if (layer && !p.grad_bias.empty()) {
    CheckF32(p.grad_bias, cols, "layer_norm backward: grad_bias");
  }
}

void CheckRope(const RopeParams& p) {
  CheckRopeRows(p.x, p.cos, p.sin, p.time, p.head_dim, p.rotate_channels, p.position_offset,
                "rope");
  CheckActivation(p.out, p.x.numel(), "rope: out");
  CheckAliasSameDType(p.out, p.x, "rope: out and x");
}

void CheckRopeBackward(const RopeBackwardParams& p) {
  CheckRopeRows(p.grad_out, p.cos, p.sin, p.time, p.head_dim, p.rotate_channels,
                p.position_offset, "rope backward");
  CheckActivation(p.grad_in, p.grad_out.numel(), "rope backward: grad_in");
  CHECK(p.grad_in.data != p.grad_out.data)
      << "rope backward: grad_in must not alias grad_out (it accumulates)";
}

void CheckAttention(const AttentionParams& p) {
  CheckAttentionSizes(p.qkv, p.out, p.batch, p.time, p.heads, p.head_dim, "attention");
  if (!p.lse.empty()) CheckF32(p.lse, p.batch * p.heads * p.time, "attention: lse (B, H, T)");
  if (!p.probs.empty()) {
    CheckF32(p.probs, p.batch * p.heads * p.time * p.time, "attention: probs (B, H, T, T)");
  }
}

void CheckAttentionBackward(const AttentionBackwardParams& p) {
  CheckAttentionSizes(p.qkv, p.out, p.batch, p.time, p.heads, p.head_dim,
                      "attention backward");
  const int64_t c = p.heads * p.head_dim;
  CheckF32(p.lse, p.batch * p.heads * p.time, "attention backward: lse (B, H, T)");
  if (!p.probs.empty()) {
    CheckF32(p.probs, p.batch * p.heads * p.time * p.time,
             "attention backward: probs (B, H, T, T)");
  }
  CheckActivation(p.grad_out, p.batch * p.time * c, "attention backward: grad_out (B, T, C)");
  CheckActivation(p.grad_qkv, p.batch * p.time * 3 * c,
                  "attention backward: grad_qkv (B, T, 3C)");
}

void CheckShareKv(const ShareKvParams& p) {
  CHECK(p.q.data != nullptr) << "share_kv: q is empty";
  const int64_t rows = p.q.shape.rows(), c = p.q.shape.cols();
  CheckActivation(p.q, rows * c, "share_kv: q (N, C)");
  CheckActivation(p.source, rows * 3 * c, "share_kv: source (N, 3C)");
  CheckActivation(p.out, rows * 3 * c, "share_kv: out (N, 3C)");
  CHECK(p.out.data != p.q.data && p.out.data != p.source.data)
      << "share_kv: out must not alias q or source";
}

void CheckShareKvBackward(const ShareKvBackwardParams& p) {
  CHECK(p.grad_out.data != nullptr) << "share_kv backward: grad_out is empty";
  const int64_t rows = p.grad_out.shape.rows(), width = p.grad_out.shape.cols();
  CHECK_EQ(width % 3, 0) << "share_kv backward: grad_out " << p.grad_out.shape.ToString()
                         << " is not (N, 3C)";
  CheckActivation(p.grad_out, rows * width, "share_kv backward: grad_out (N, 3C)");
  if (!p.grad_q.empty()) {
    CheckActivation(p.grad_q, rows * width / 3, "share_kv backward: grad_q (N, C)");
  }
  if (!p.grad_source.empty()) {
    CheckActivation(p.grad_source, rows * width, "share_kv backward: grad_source (N, 3C)");
    CHECK(p.grad_source.data != p.grad_out.data)
        << "share_kv backward: grad_source must not alias grad_out (it accumulates)";
  }
}

void CheckEmbedding(const EmbeddingParams& p) {
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.table.shape.rows(), cols = p.table.shape.cols();
  CheckI32(p.ids, count, "embedding: ids");
  CheckF32(p.table, vocab * cols, "embedding: table (V, C)");
  CheckF32(p.out, count * cols, "embedding: out (N, C)");
}

void CheckEmbeddingBackward(const EmbeddingBackwardParams& p) {
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.grad_table.shape.rows(), cols = p.grad_table.shape.cols();
  CheckI32(p.ids, count, "embedding backward: ids");
  CheckF32(p.grad_table, vocab * cols, "embedding backward: grad_table (V, C)");
  CheckF32(p.grad_out, count * cols, "embedding backward: grad_out (N, C)");
}

void CheckCrossEntropy(const CrossEntropyParams& p) {
  const int64_t rows = p.logits.shape.rows(), vocab = p.logits.shape.cols();
  CheckF32(p.logits, rows * vocab, "cross_entropy: logits (N, V)");
  CheckI32(p.targets, rows, "cross_entropy: targets (N)");
  CheckF32(p.losses, rows, "cross_entropy: losses (N)");
  if (!p.lse.empty()) CheckF32(p.lse, rows, "cross_entropy: lse (N)");
}

void CheckCrossEntropyBackward(const CrossEntropyBackwardParams& p) {
  const int64_t rows = p.logits.shape.rows(), vocab = p.logits.shape.cols();
  CheckF32(p.logits, rows * vocab, "cross_entropy backward: logits (N, V)");
  CheckI32(p.targets, rows, "cross_entropy backward: targets (N)");
  CheckF32(p.lse, rows, "cross_entropy backward: lse (N)");
  CheckF32(p.grad_losses, rows, "cross_entropy backward: grad_losses (N)");
  CheckActivation(p.grad_logits, rows * vocab, "cross_entropy backward: grad_logits (N, V)");
  CheckAliasSameDType(p.grad_logits, p.logits, "cross_entropy backward: grad_logits in place");
}

void CheckReduce(const ReduceParams& p, const char* op) {
  CheckF32Named(p.in, p.in.numel(), Operand{op, "in"});
  CheckF32Named(p.out, 1, Operand{op, "out (1)"});
}

void CheckAdamW(const AdamWParams& p) {
  const int64_t n = p.param.numel();
  CheckF32(p.param, n, "adamw: param");
  CheckF32(p.grad, n, "adamw: grad");
  CheckF32(p.m, n, "adamw: m");
  CheckF32(p.v, n, "adamw: v");
  CHECK(!p.scalars.empty() || p.step >= 1) << "adamw: step is 1-based";
  if (!p.grad_norm_sq.empty() && p.max_grad_norm > 0) {
    CheckF32(p.grad_norm_sq, 1, "adamw: grad_norm_sq (1)");
  }
  if (!p.scalars.empty()) CheckF32(p.scalars, AdamWStepScalars::kCount, "adamw: scalars (3)");
}

void CheckRowSumSquares(const RowReduceParams& p) {
  CheckF32(p.in, p.in.numel(), "row_sum_squares: in");
  CheckF32(p.out, p.in.shape.rows(), "row_sum_squares: out (R)");
}

void CheckRowScale(const RowScaleParams& p) {
  const int64_t rows = p.in.shape.rows();
  CheckF32(p.in, p.in.numel(), "row_scale: in");
  CheckF32(p.out, p.in.numel(), "row_scale: out");
  if (!p.numer.empty()) CheckF32(p.numer, rows, "row_scale: numer (R)");
  if (!p.denom.empty()) CheckF32(p.denom, rows, "row_scale: denom (R)");
  if (!p.scale.empty()) CheckF32(p.scale, 1, "row_scale: scale (1)");
}

void CheckGatherSequences(const GatherSequencesParams& p) {
  const int64_t rows = p.starts.numel();
  CHECK_GT(p.time, 0) << "gather_sequences: time";
  CheckI32(p.tokens, p.tokens.numel(), "gather_sequences: tokens (S)");
  CheckI32(p.starts, rows, "gather_sequences: starts (B)");
  CheckI32(p.inputs, rows * p.time, "gather_sequences: inputs (B·T)");
  CheckI32(p.targets, rows * p.time, "gather_sequences: targets (B·T)");
}

namespace {

// The rows N of a latent qkv call, from its (N, 3·H·D) qkv side.
int64_t LatentQkvRows(const Tensor& qkv, int64_t heads, int64_t head_dim, int64_t rope_dim,
                      const char* op) {
  CHECK(heads > 0 && head_dim > 0) << op << ": heads " << heads << ", head_dim " << head_dim
                                   << " must be positive";
  CHECK(rope_dim > 0 && rope_dim % 2 == 0 && rope_dim < head_dim)
      << op << ": rope_dim " << rope_dim << " must be even, positive and below head_dim "
      << head_dim;
  const int64_t width = 3 * heads * head_dim;
  CHECK(qkv.data != nullptr && qkv.numel() % width == 0)
      << op << ": qkv " << qkv.shape.ToString() << " is not rows of 3·H·D = " << width;
  return qkv.numel() / width;
}

}  // namespace

void CheckLatentQkv(const LatentQkvParams& p) {
  const int64_t n = LatentQkvRows(p.out, p.heads, p.head_dim, p.rope_dim, "latent_qkv");
  const int64_t hd = p.heads * p.head_dim, hn = p.heads * (p.head_dim - p.rope_dim);
  CheckActivation(p.out, n * 3 * hd, "latent_qkv: out (N, 3·H·D)");
  CheckActivation(p.q, n * hd, "latent_qkv: q (N, H·D)");
  CheckActivation(p.kv, n * (hn + hd), "latent_qkv: kv (N, H·Dn + H·D)");
  CheckActivation(p.k_rope, n * p.rope_dim, "latent_qkv: k_rope (N, R)");
  for (const Tensor* in : {&p.q, &p.kv, &p.k_rope}) {
    CHECK(in->data != p.out.data) << "latent_qkv: out must not alias an input";
  }
}

void CheckLatentQkvBackward(const LatentQkvBackwardParams& p) {
  const int64_t n =
      LatentQkvRows(p.grad_out, p.heads, p.head_dim, p.rope_dim, "latent_qkv backward");
  const int64_t hd = p.heads * p.head_dim, hn = p.heads * (p.head_dim - p.rope_dim);
  CheckActivation(p.grad_out, n * 3 * hd, "latent_qkv backward: grad_out (N, 3·H·D)");
  if (!p.grad_q.empty()) CheckActivation(p.grad_q, n * hd, "latent_qkv backward: grad_q");
  if (!p.grad_kv.empty()) {
    CheckActivation(p.grad_kv, n * (hn + hd), "latent_qkv backward: grad_kv");
  }
  if (!p.grad_k_rope.empty()) {
    CheckActivation(p.grad_k_rope, n * p.rope_dim, "latent_qkv backward: grad_k_rope");
  }
  for (const Tensor* g : {&p.grad_q, &p.grad_kv, &p.grad_k_rope}) {
    CHECK(g->empty() || g->data != p.grad_out.data)
        << "latent_qkv backward: a gradient must not alias grad_out (they accumulate)";
  }
}

}  // namespace smallem
