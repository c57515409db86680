// Backend: the one interface between the engine and a device.
//
// Every op of engine/op_list.h is a method taking a typed parameter struct,
// and every backend implements all of them; a shape a backend has no kernel
// for (a head size on CUDA) is a CHECK failure that says so. The CPU backend
// (engine/cpu/) is the reference every other backend is judged against; the
// CUDA backend lives in kernels/ (kernels/cuda_backend.h). The operands'
// contracts below are CHECKed alike by every backend (engine/op_checks.h).
// ForwardingBackend (engine/forwarding_backend.h) is the base of decorators.
//
// Conventions shared by every backend:
//  * Tensors are f32 unless the field says otherwise (token ids and targets
//    are i32), except activations (below). A backend may compute in lower
//    precision internally (bf16 matmul inputs on CUDA).
//  * Activations: the fields marked [act] may each be f32 or bf16
//    (Tensor::dtype), independently of each other. A backend reads them as
//    f32, computes in f32 and rounds once, to nearest even, when it stores
//    into a bf16 one; a backward accumulates into a bf16 gradient as
//    bf16(f32(grad) + contribution). So an op on bf16 operands equals the
//    f32 op on their (exact) f32 values with its outputs rounded — what the
//    CPU reference computes (engine/cpu/bf16_ops.h). Aliasing rules hold
//    across dtypes only between operands of the same dtype.
//  * Forward ops OVERWRITE their outputs. Backward ops ACCUMULATE (+=) into
//    every gradient they produce, so several consumers of one tensor can add
//    their contributions; the tape zeroes a gradient before its first use.
//  * Calls are asynchronous on devices that queue work: results are visible to
//    the host only after CopyToHost (which synchronizes).
//  * A Backend is used by one thread at a time.
#ifndef SMALLEM_ENGINE_BACKEND_H_
#define SMALLEM_ENGINE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/op.h"
#include "engine/tensor.h"

namespace smallem {

// out[i] = alpha · op(a[i]) · op(b[i]) + beta · out[i] for i in [0, batch),
// where op(x) = xᵀ when trans_x. op(a[i]) is (M, K), op(b[i]) is (K, N) and
// out[i] is (M, N), all row-major. stride_* is the element distance between
// consecutive batch items (0 broadcasts one matrix to the whole batch).
struct MatmulParams {
  Tensor a, b, out;  // [act]
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
  float alpha = 1.0f, beta = 0.0f;
};

// Elementwise ops: every tensor has the same numel. out may alias an input.
// Every tensor of the elementwise ops is [act].
struct BinaryParams {
  Tensor a, b, out;
};
struct BinaryBackwardParams {
  Tensor a, b;                 // forward inputs (unused by Add)
  Tensor grad_out;             // dL/d(out)
  Tensor grad_a, grad_b;       // += ; either may be empty (not needed)
};
struct UnaryParams {
  Tensor in, out;
};
struct UnaryBackwardParams {
  Tensor in;        // forward input
  Tensor grad_out;  // dL/d(out)
  Tensor grad_in;   // += f'(in) · grad_out
};
struct SwiGluParams {
  Tensor gate, up;  // (N, F)
  Tensor out;       // (N, F) = silu(gate) · up
};
struct SwiGluBackwardParams {
  Tensor gate, up, grad_out;  // (N, F)
  Tensor grad_gate, grad_up;  // (N, F) += (= when overwrite)
  // Both gradients = instead of +=: their prior contents are never read, so
  // fresh gradients need no zero fill.
  bool overwrite = false;
};

struct BiasAddParams {
  Tensor x;     // (N, C) [act], updated in place: x[n, :] += bias
  Tensor bias;  // (C)
};
struct BiasBackwardParams {
  Tensor grad_out;   // (N, C) [act]
  Tensor grad_bias;  // (C) += Σ_n grad_out[n, :]
};

// The feed-forward's bias and GELU in one pass over the (N, C) buffer:
// out = gelu(x + bias), x being the product without its bias and x + bias
// an f32 sum never stored (with f32 x: the bits of BiasAdd then GELU). The
// backward computes d = gelu'(x + bias) · grad_out once per element and
// adds it to grad_x (or writes it, with overwrite: no zeroed buffer, no
// read) and, summed over rows in order, to grad_bias.
struct BiasGeluParams {
  Tensor x;     // (N, C) [act]
  Tensor bias;  // (C), or empty: plain GELU
  Tensor out;   // (N, C) [act]; may alias x (same dtype)
};
struct BiasGeluBackwardParams {
  Tensor x, bias;      // as in the forward
  Tensor grad_out;     // (N, C) [act]
  Tensor grad_x;       // (N, C) [act] += d (= d with overwrite), or empty
  Tensor grad_bias;    // (C) += Σ_n d[n, :], or empty
  bool overwrite = false;
};

// LayerNorm: out = (x − mean) · rstd · gain + bias.
// RMSNorm:   out = x · rstd · gain, rstd = 1/√(mean(x²) + eps); mean and bias
// are empty.
// With a residual, the op first makes the residual add of a transformer block,
// sum = x + residual (rounded exactly as Add rounds it), writes it and
// normalizes sum instead of x: one read of x and residual, one write of sum
// and out. The backward is the plain norm backward with x = sum. sum may
// alias x or residual.
struct NormParams {
  Tensor x;         // (N, C) [act]
  Tensor gain;      // (C)
  Tensor bias;      // (C), LayerNorm only
  Tensor out;       // (N, C) [act]
  Tensor mean;      // (N) saved for backward, LayerNorm only
  Tensor rstd;      // (N) saved for backward
  Tensor residual;  // (N, C) [act] or empty (no add)
  Tensor sum;       // (N, C) [act] = x + residual; given exactly when residual is
  float eps = 1e-5f;
};
struct NormBackwardParams {
  Tensor x, gain, mean, rstd;  // as in the forward (x [act])
  Tensor grad_out;             // (N, C) [act]
  Tensor grad_x;               // (N, C) [act] +=
  Tensor grad_gain;            // (C) +=
  Tensor grad_bias;            // (C) +=, LayerNorm only
};

// Rotary positions. Each row of x is W channels; the first rotate_channels
// are heads of D channels in which adjacent pairs (2i, 2i+1) at position m
// rotate by m·10000^(−2i/D); the other channels pass through. Row n of x is
// the token at position (n mod T) + position_offset. cos/sin are host-computed
// tables (max_position, D/2). out may alias x.
struct RopeParams {
  Tensor x;    // (B, T, W) [act]
  Tensor out;  // (B, T, W) [act]
  Tensor cos, sin;  // (P, D/2)
  int64_t time = 0;
  int64_t head_dim = 0;
  int64_t rotate_channels = 0;
  int64_t position_offset = 0;
};
struct RopeBackwardParams {
  Tensor grad_out;  // (B, T, W) [act]
  Tensor grad_in;   // (B, T, W) [act] += rotation by −angle of grad_out (= when overwrite)
  Tensor cos, sin;
  int64_t time = 0;
  int64_t head_dim = 0;
  int64_t rotate_channels = 0;
  int64_t position_offset = 0;
  // grad_in = instead of +=: a fresh gradient needs no zero fill.
  bool overwrite = false;
};

// Causal multi-head attention from packed projections. qkv row (b, t) holds
// [q | k | v], each C = H·D channels with head h in channels [h·D, (h+1)·D).
// out = softmax(q·kᵀ/√D, causal) · v per head; lse is the per-row
// log-sum-exp of the scaled scores, saved so the backward recomputes the
// probabilities without storing a T × T matrix.
struct AttentionParams {
  Tensor qkv;  // (B, T, 3C) [act]
  Tensor out;  // (B, T, C) [act]
  Tensor lse;  // (B, H, T)
  // Optional (B, H, T, T) f32, given only to a backend whose
  // SavesAttentionProbs says so: the forward keeps the softmax there, in the
  // backend's own layout, and the backward reads it back instead of
  // recomputing Q·Kᵀ and its exps.
  Tensor probs;
  int64_t batch = 0, time = 0, heads = 0, head_dim = 0;
};
struct AttentionBackwardParams {
  Tensor qkv, out, lse;  // as in the forward
  Tensor probs;          // the forward's, or empty: recompute
  Tensor grad_out;       // (B, T, C) [act]
  Tensor grad_qkv;       // (B, T, 3C) [act] += (= when overwrite)
  int64_t batch = 0, time = 0, heads = 0, head_dim = 0;
  // grad_qkv = instead of +=: its prior contents are never read, so a fresh
  // gradient needs no zero fill.
  bool overwrite = false;
};

// Multi-head latent attention's qkv, packed for the attention op from its
// parts (engine/model/latent_attention.h). H heads of D channels, each split
// into R rotary channels then Dn = D − R content channels. Per row:
//   q      (N, H·D): the R rotary channels of every head (H·R), then the Dn
//          content channels of every head (H·Dn)
//   kv     (N, H·Dn + H·D): every head's key content, then every head's value
//   k_rope (N, R): the one rotary key part all heads share
// out (N, 3·H·D), qkv as AttentionParams reads it: query head h =
// [q rotary_h | q content_h], key head h = [k_rope | key content_h], value
// head h. The backward scatters grad_out back; grad_k_rope gets the sum over
// heads.
struct LatentQkvParams {
  Tensor q, kv, k_rope;  // [act]
  Tensor out;            // (N, 3·H·D) [act]
  int64_t heads = 0, head_dim = 0, rope_dim = 0;
};
struct LatentQkvBackwardParams {
  Tensor grad_out;                      // (N, 3·H·D) [act]
  Tensor grad_q, grad_kv, grad_k_rope;  // [act] +=; any may be empty (not needed)
  int64_t heads = 0, head_dim = 0, rope_dim = 0;
};

// Keys and values borrowed from another layer (own_keys): out row n is
// [q[n] | source[n, C:3C]], a packed qkv for the attention op whose keys and
// values are those of source, the packed qkv of the layer that computed
// them. q has C channels per row; out may alias neither input.
struct ShareKvParams {
  Tensor q;       // (N, C) [act]
  Tensor source;  // (N, 3C) [act]
  Tensor out;     // (N, 3C) [act]
};
struct ShareKvBackwardParams {
  Tensor grad_out;     // (N, 3C) [act]
  Tensor grad_q;       // (N, C) [act] += grad_out[:, 0:C]; may be empty
  // (N, 3C) [act] += grad_out on channels C…3C (its queries get nothing);
  // may be empty.
  Tensor grad_source;
};

struct EmbeddingParams {
  Tensor ids;    // (N) i32, each in [0, V)
  Tensor table;  // (V, C)
  Tensor out;    // (N, C) = table[ids]
};
// Deterministic: the result does not depend on thread scheduling.
struct EmbeddingBackwardParams {
  Tensor ids;         // (N) i32
  Tensor grad_out;    // (N, C)
  Tensor grad_table;  // (V, C) +=
};

// losses[n] = lse(logits[n]) − logits[n, targets[n]].
struct CrossEntropyParams {
  Tensor logits;   // (N, V)
  Tensor targets;  // (N) i32
  Tensor losses;   // (N)
  Tensor lse;      // (N) saved for backward
};
struct CrossEntropyBackwardParams {
  Tensor logits, targets, lse;
  Tensor grad_losses;  // (N)
  Tensor grad_logits;  // (N, V) [act] += (softmax − onehot) · grad_losses[n]
  // grad_logits = instead of +=. An f32 grad_logits may then be the logits'
  // own memory: the loss's backward turns the logits into their gradient in
  // place, so (N, V) f32 exists once, not twice; in the speed mode it writes
  // a bf16 gradient instead, which the products read as it is
  // (engine/autograd/ops.h).
  bool overwrite = false;
};

struct ReduceParams {
  Tensor in;   // any shape
  Tensor out;  // scalar (1): Σ in (kSum) or Σ in² (kSumSquares)
  bool accumulate = false;  // out += instead of out =
};

// The scalars of one AdamW update that change from step to step, as the
// update reads them: the learning rate and the bias corrections
// 1/(1 − β^step), computed on the host in double and rounded to f32.
struct AdamWStepScalars {
  float lr = 0, correction1 = 1, correction2 = 1;
  static constexpr int64_t kCount = 3;  // floats, in field order
};
// REQUIRES: step ≥ 1.
AdamWStepScalars MakeAdamWStepScalars(float lr, float beta1, float beta2, int64_t step);

// One AdamW step on one parameter tensor. When grad_norm_sq is given and
// max_grad_norm > 0, the gradient is first scaled by
// min(1, max_grad_norm / √grad_norm_sq) — read on the device, no host sync.
// The learning rate and bias corrections come from `lr` and `step`, or, when
// `scalars` is given, from device memory: an AdamWStepScalars that the host
// uploads each step, so that a captured step (CaptureGraph) replays with the
// step's values rather than those of the capture.
struct AdamWParams {
  Tensor param, grad, m, v;  // same shape
  Tensor grad_norm_sq;       // (1) or empty
  Tensor scalars;            // (3) AdamWStepScalars, or empty: lr and step below
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0;  // decoupled: param −= lr · wd · param
  float max_grad_norm = 0;
  int64_t step = 1;  // 1-based, for bias correction
};

// Per-row statistics for optimizers (Muon's per-matrix Frobenius norms,
// NorMuon's per-neuron running mean): with in viewed as (R, K), R = rows()
// of its shape and K = cols(),
//   out[r] = alpha · Σ_k in[r, k]² + beta · out[r]   (beta = 0 never reads out)
// accumulated in double, in a fixed order (independent of the thread count).
struct RowReduceParams {
  Tensor in;   // (R, K)
  Tensor out;  // (R)
  float alpha = 1.0f, beta = 0.0f;
};

// Per-row scaling for optimizers: with in viewed as (R, K),
//   out[r, :] = a · in[r, :] · √numer[r] / √(denom[r] + eps)
// where a = alpha, or alpha · scale[0] (an f32 product) when scale is given
// (a per-step factor read on the device, like AdamWParams::scalars); an
// empty numer or denom counts as 1, and a row whose denom[r] + eps is not
// positive gets a factor 0 (a zero matrix stays zero). The factor of each
// row is computed in double and rounded to f32 once. With numer and denom
// empty it is a plain scale by a. out may alias in.
struct RowScaleParams {
  Tensor in;     // (R, K)
  Tensor out;    // (R, K)
  Tensor numer;  // (R) or empty
  Tensor denom;  // (R) or empty
  Tensor scale;  // (1) or empty
  float alpha = 1.0f, eps = 0.0f;
};

// Training batches gathered on the device from the training split held there
// (engine/train/trainer.cc): row r of the batch is the T + 1 tokens starting
// at starts[r]; inputs take the first T, targets the last T. A start outside
// [0, S − T − 1] is a broken invariant (CHECK on the CPU, a trap on CUDA).
struct GatherSequencesParams {
  Tensor tokens;   // (S) i32, the training split
  Tensor starts;   // (B) i32
  Tensor inputs;   // (B·T) i32: inputs[r·T + t] = tokens[starts[r] + t]
  Tensor targets;  // (B·T) i32: targets[r·T + t] = tokens[starts[r] + t + 1]
  int64_t time = 0;  // T
};

// Mixture of experts (engine/model/moe.h): N tokens, E experts, k experts
// per token, R = N·k assignments. Assignment slot s = n·k + j is token n's
// j-th choice; the slots sorted by expert (stably, so by slot within an
// expert) give the order in which rows meet the experts, each expert's rows
// contiguous. Dropless: every slot is one row.
//
// Routing. The top-k experts of each token by logits[n] + bias (ties: the
// lower expert index first); gates are the softmax over the k chosen logits
// (without the bias). offsets are the exclusive prefix sums of the counts.
// The backward is the gates' softmax backward with the choice held fixed,
// plus, when aux_coefficient α > 0, the gradient of the auxiliary loss
// α·E·Σ_e f_e·P_e, f_e = count_e/R and P_e = mean over tokens of
// softmax(logits[n])_e (f held constant).
struct MoeRouteParams {
  Tensor logits;    // (N, E) f32
  Tensor bias;      // (E) f32 selection bias, or empty (none)
  Tensor experts;   // (N, k) i32 out: chosen experts, best first
  Tensor gates;     // (N, k) f32 out
  Tensor order;     // (R) i32 out: order[i] = the slot at sorted row i
  Tensor position;  // (R) i32 out: position[order[i]] = i
  Tensor offsets;   // (E + 1) i32 out: expert e has rows [offsets[e], offsets[e + 1])
  Tensor load;      // (E) f32 += tokens routed to each expert, or empty
  int64_t top_k = 0;
};
struct MoeRouteBackwardParams {
  Tensor logits, experts, gates, offsets;  // as in the forward
  Tensor grad_gates;                       // (N, k) f32
  Tensor grad_logits;                      // (N, E) f32 +=
  float aux_coefficient = 0;               // α; 0 = no auxiliary loss
};
// Bias balancing (DeepSeek-V3), outside the gradient:
//   bias[e] += rate · sign(mean(load) − load[e]); last_load = load; load = 0.
struct MoeBalanceParams {
  Tensor bias;       // (E) f32, updated
  Tensor load;       // (E) f32 tokens per expert since the last call; zeroed
  Tensor last_load;  // (E) f32 out: load as it was (the routing statistics)
  float rate = 0;
};
// Dispatch: out[i] = x[order[i] / k]; its backward sums each token's k rows
// in slot order (deterministic).
struct MoeDispatchParams {
  Tensor x;      // (N, C) [act]
  Tensor order;  // (R) i32
  Tensor out;    // (R, C) [act]
  int64_t top_k = 0;
};
struct MoeDispatchBackwardParams {
  Tensor grad_out;  // (R, C) [act]
  Tensor position;  // (R) i32
  Tensor grad_x;    // (N, C) [act] += Σ_j grad_out[position[n·k + j]]
  int64_t top_k = 0;
};
// Combine: out[n] = Σ_j gates[n, j] · rows[position[n·k + j]], j ascending.
struct MoeCombineParams {
  Tensor rows;      // (R, C) [act], the experts' outputs in sorted order
  Tensor gates;     // (N, k) f32
  Tensor position;  // (R) i32
  Tensor out;       // (N, C) [act]
};
struct MoeCombineBackwardParams {
  Tensor rows, gates, position;  // as in the forward
  Tensor grad_out;               // (N, C) [act]
  Tensor grad_rows;              // (R, C) [act] += gates[n, j] · grad_out[n], or empty
  Tensor grad_gates;             // (N, k) f32 += rows[…] · grad_out[n], or empty
  // grad_rows = instead of += (every row is some slot's): saves zeroing it.
  bool overwrite_rows = false;
};
// Grouped product: rows [offsets[g], offsets[g + 1]) of x times weight[g]ᵀ,
// one product per group over its contiguous rows; offsets live in device
// memory (no host read, so a step stays capturable).
struct GroupedMatmulParams {
  Tensor x;        // (R, K) [act]
  Tensor weight;   // (G, M, K) f32
  Tensor offsets;  // (G + 1) i32, offsets[0] = 0, non-decreasing, offsets[G] = R
  Tensor out;      // (R, M) [act]
};
struct GroupedMatmulBackwardParams {
  Tensor x, weight, offsets;  // as in the forward
  Tensor grad_out;            // (R, M) [act]
  Tensor grad_x;              // (R, K) [act] += grad_out_g · weight[g], or empty
  Tensor grad_weight;         // (G, M, K) f32 += grad_out_gᵀ · x_g, or empty
  // grad_x = instead of += (offsets cover every row): saves zeroing it.
  bool overwrite_x = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda:0".
  virtual std::string Name() const = 0;
  // What timings are comparable across: "cpu-2c" or the GPU model name.
  virtual std::string DeviceClass() const = 0;
  // Peak dense throughput in FLOP/s for MFU, 0 when unknown.
  virtual double PeakFlops() const { return 0; }
  // The dtype autograd stores activations in by default (Tape): kF32, or
  // kBF16 in a backend's speed mode (CUDA with bf16 matmuls).
  virtual DType ActivationDType() const { return DType::kF32; }
  // Whether attention's forward should be given a (B, H, T, T) buffer to
  // keep its softmax for the backward (AttentionParams::probs): a trade of
  // activation memory for the backward's recomputation.
  virtual bool SavesAttentionProbs(int64_t batch, int64_t heads, int64_t time) const {
    return false;
  }
  // OK when this backend's attention has a kernel for heads of `head_dim`
  // elements; otherwise InvalidArgument saying which sizes it takes
  // (Model::Create refuses a model the backend cannot run).
  virtual absl::Status CheckAttentionHeadDim(int64_t head_dim) const { return absl::OkStatus(); }
  // Rows per chunk of the training loss computed with its (vocab, width)
  // head (HeadLoss, engine/autograd/ops.h), for `rows` rows: 0 (the plain
  // composition, the default), `rows` (one chunk), or fewer, where a chunk's
  // logits and the head then stay in cache from the product that makes them
  // to the products that read their gradient.
  virtual int64_t HeadLossChunkRows(int64_t rows, int64_t vocab, int64_t width) const {
    return 0;
  }

  // Memory. Allocate returns zeroed, 64-byte aligned memory or an error
  // (out of memory says how much was asked).
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyOnDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void Fill(Tensor t, float value) = 0;
  virtual void Synchronize() = 0;
  // Bytes of device memory in use at the high-water mark.
  virtual size_t PeakMemoryBytes() const = 0;

  // Staging: host memory the device copies from asynchronously, for inputs
  // that change every step (batch positions, learning rates). On CUDA it is
  // page-locked memory; the default is plain host memory (what the CPU
  // backend uses). AllocateStaging returns zeroed, 64-byte aligned memory or
  // an error; FreeStaging takes only what AllocateStaging returned.
  virtual absl::StatusOr<void*> AllocateStaging(size_t bytes);
  virtual void FreeStaging(void* ptr);
  // Enqueues dst (device memory) ← src (staging memory) and returns at once.
  // The host may rewrite src only once WaitStaged() has returned. Inside
  // CaptureGraph the copy is recorded: each replay reads src as it is then.
  // Default: CopyToDevice (which leaves src reusable at once).
  virtual void UploadStaged(void* dst, const void* src, size_t bytes) {
    CopyToDevice(dst, src, bytes);
  }
  // Blocks until every UploadStaged enqueued so far — directly or by a
  // launched graph — has read its source. Not allowed inside CaptureGraph.
  virtual void WaitStaged() {}

  // CUDA graphs: a step recorded once and replayed with one launch. Backends
  // without them (the default) return false and never get the calls below.
  virtual bool SupportsGraphs() const { return false; }
  // Calls `record()` with the backend recording instead of running: the ops
  // it enqueues, with their pointers and arguments, become a graph, and
  // nothing executes until LaunchGraph. `record` may be called more than
  // once and must make the same calls each time. Inside it nothing may
  // allocate, free, synchronize or copy to the host (a CHECK failure names
  // the call), so every buffer must have reached its size before, in an
  // uncaptured run of the same calls. A CopyToDevice inside it is recorded
  // with a copy of its host bytes taken at capture time: fine for constants,
  // while values that change per step go through UploadStaged. Returns a
  // handle for LaunchGraph, or an error when the graph cannot be
  // instantiated (e.g. out of memory).
  virtual absl::StatusOr<int> CaptureGraph(const std::function<void()>& record);
  // Enqueues one replay of a captured graph.
  virtual void LaunchGraph(int graph);
  // Destroys every captured graph (after the replays queued so far finish),
  // e.g. before the memory they use is freed. Handles become invalid.
  virtual void ReleaseGraphs() {}

  // The ops, one method per entry of SMALLEM_BACKEND_OPS (engine/op_list.h),
  // each `void Method(const Params& p)` with the params struct above.
#define SMALLEM_DECLARE_PURE_OP(Method, Params, op) virtual void Method(const Params& p) = 0;
  SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_PURE_OP)
#undef SMALLEM_DECLARE_PURE_OP
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_BACKEND_H_
