// Differentiable ops: each computes its output with one backend call and
// records a hand-written backward rule that uses only what it saved. Shapes
// follow the glossary of engine/tensor.h; rows N = B·T.
#ifndef SMALLEM_ENGINE_AUTOGRAD_OPS_H_
#define SMALLEM_ENGINE_AUTOGRAD_OPS_H_

#include <cstdint>

#include "engine/autograd/tape.h"

namespace smallem {

// Activation dtypes (engine/backend.h, "Activations"): the products and the
// norms' outputs are stored in the tape's activation_dtype() — bf16 in the
// speed mode, the inputs of the next products — unless asked for f32 (the
// logits, which the loss reads); every other op's output takes its input's
// dtype (a residual stream that starts f32 stays f32), and embeddings,
// losses and the saved statistics are f32.
enum class Output : uint8_t {
  kActivation,  // the tape's activation dtype
  kF32,
};

// y = op(a) · op(b), batched over the leading dimension when both are 3-D:
// a (…, M, K) (or (…, K, M) when trans_a), b (…, K, N) (or (…, N, K)).
Var Matmul(Tape& tape, Var a, Var b, bool trans_a = false, bool trans_b = false,
           Output output = Output::kActivation);
// y = x · wᵀ (+ bias): x (N, in), w (out, in), bias (out) or invalid → (N, out).
Var Linear(Tape& tape, Var x, Var w, Var bias = {}, Output output = Output::kActivation);
Var Add(Tape& tape, Var a, Var b);
Var Mul(Tape& tape, Var a, Var b);
Var Gelu(Tape& tape, Var x);
// gelu(x + bias) in one backend call: x (N, C) a product without its bias,
// bias (C) or invalid. Equals Gelu(x + bias), with the bias's gradient
// summed in the same pass; x's gradient is written, not added, when this
// op is the first to reach it.
Var BiasGelu(Tape& tape, Var x, Var bias);
Var SwiGlu(Tape& tape, Var gate, Var up);  // silu(gate) · up
// x (N, C); gain, bias (C). bias is invalid for RmsNorm.
Var LayerNorm(Tape& tape, Var x, Var gain, Var bias);
Var RmsNorm(Tape& tape, Var x, Var gain);

// The residual add fused with the norm that follows it: sum = x + residual
// and normed = LayerNorm(sum) (or RmsNorm), in one backend call. Records the
// same two nodes as Add then LayerNorm (RmsNorm), so values, gradients and
// the order gradients accumulate in are those of the separate ops.
// residual has x's element count and row width; both outputs take x's shape.
struct NormedSum {
  Var sum;     // x + residual, the shape of x
  Var normed;  // the norm of sum, the shape of x
};
NormedSum AddLayerNorm(Tape& tape, Var x, Var residual, Var gain, Var bias);
NormedSum AddRmsNorm(Tape& tape, Var x, Var residual, Var gain);

struct RopeTables {
  Tensor cos, sin;  // (P, D/2)
};
// Rotates the first `rotate_channels` channels of x (B, T, W), in heads of
// head_dim, at positions offset + t.
Var Rope(Tape& tape, Var x, const RopeTables& tables, int64_t time, int64_t head_dim,
         int64_t rotate_channels, int64_t offset = 0);
// qkv (B, T, 3C) → (B, T, C), causal, H heads.
Var Attention(Tape& tape, Var qkv, int64_t batch, int64_t time, int64_t heads);
// Latent attention's parts packed into the qkv Attention reads
// (LatentQkvParams in engine/backend.h): q (N, H·D), kv (N, H·(2D − R)),
// k_rope (N, R) → (N, 3·H·D), in q's dtype.
Var LatentQkv(Tape& tape, Var q, Var kv, Var k_rope, int64_t heads, int64_t head_dim,
              int64_t rope_dim);
// ids (N) i32, table (V, C) → (N, C).
Var Embedding(Tape& tape, Var ids, Var table);
// logits (N, V), targets (N) i32 → per-row losses (N), nats. When nothing
// else reads the logits, the backward writes their gradient in the tape's
// activation dtype (Tape::GradToOverwrite): over the f32 logits themselves
// (one (N, V) f32 buffer, not two; read the logits before Backward), or, in
// the speed mode, as bf16 that the classifier's products read without a
// rounding pass.
Var CrossEntropy(Tape& tape, Var logits, Var targets);
// Mean of every element → scalar (1).
Var Mean(Tape& tape, Var x);
// The training loss with its head, x (N, C) and table (V, C) → scalar (1):
// (1/N)·Σ_n mask_n·CE(x_n·tableᵀ, targets_n), the mask (N) f32 optional.
// Where the backend asks for chunks (Backend::HeadLossChunkRows) and grad is
// enabled, the forward runs the loss's whole backward chunk by chunk of
// rows, each chunk's logits still in cache: product, loss, its gradient in
// place (a few rows at a time, each group's logits read from cache the
// second time), and the products with it that give x's and table's
// gradients, kept for the backward to scale by the loss's own gradient; a
// single chunk holds all N rows where the head is too large to chunk.
// Otherwise it is Mean(Mul(CrossEntropy(Linear(x, table)), mask)), with f32
// logits. `chunk_rows` > 0 overrides the backend, kPlainHeadLoss asks for
// the plain composition (tests, benches).
inline constexpr int64_t kPlainHeadLoss = -1;
Var HeadLoss(Tape& tape, Var x, Var table, Var targets, Tensor mask = {},
             int64_t chunk_rows = 0);

// q (N, C), source (N, 3C) → (N, 3C) = [q | keys and values of source]: the
// packed qkv of a layer that borrows the keys and values of another
// (own_keys). The output takes q's dtype.
Var ShareKv(Tape& tape, Var q, Var source);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_AUTOGRAD_OPS_H_
