// Model: the configurable pre-norm Transformer of docs/model.md.
//
//   x = embed[tokens] (+ positions[t])            (N, C), N = B·T
//   per block: u = x + proj(attn(rope?(qkv(norm1(x)))))
//              x = u + ff(norm2(u))               gelu: proj(gelu(up))
//                                                 swiglu: proj(silu(gate)·up)
//   logits = final_norm(x) · embedᵀ               (N, V), tied head
// With attention: latent, attn's qkv comes from a compressed latent instead
// of one (3C, C) product (engine/model/latent_attention.h).
//   mtp: D extra depths on top, each predicting one token further
//        (engine/model/mtp.h); trained, never used to generate
//
// Every parameter lives in one contiguous f32 buffer (and its gradient in a
// second of the same layout), so zeroing gradients, the gradient norm and
// checkpoints are single calls. Which parameters, their names, shapes and
// order are runspec/parameter_layout.h's; the model only views them. Query,
// key and value weights of a block are adjacent there — a (3C, C) matrix —
// so one GEMM produces the packed qkv the attention op reads; the weights
// file still names them separately.
// With own_keys, a layer past the owners has a query matrix (C, C) alone and
// borrows the keys and values of the last owner (engine/model/shared_keys.h);
// with passes, the blocks run `passes` times over the stream, same weights.
// A Model is used by one thread at a time.
#ifndef SMALLEM_ENGINE_MODEL_MODEL_H_
#define SMALLEM_ENGINE_MODEL_MODEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/backend.h"
#include "engine/model/latent_attention.h"
#include "engine/model/moe.h"
#include "runspec/model_config.h"
#include "runspec/parameter_layout.h"

namespace smallem {

class Model {
 public:
  struct Parameter {
    std::string name;  // docs/architecture.md § The formats, e.g. "blocks.0.attn.query.weight"
    Tensor value;      // view into the parameter buffer
    Tensor grad;       // view into the gradient buffer, same shape
    bool decay;        // weight decay applies (matrices and embeddings)
    bool hidden_matrix;  // Muon's under a Muon optimizer (ParameterSlot::hidden_matrix)
  };

  // Allocates (zeroed) parameters for a validated config.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const ModelConfig& config,
                                                       Backend& backend);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  // Parameter i is layout().slots()[i].
  const ParameterLayout& layout() const { return layout_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  // nullptr when absent.
  const Parameter* Find(const std::string& name) const;
  Tensor values() const { return values_; }  // (P) every parameter
  Tensor grads() const { return grads_; }    // (P) every gradient
  int64_t ParameterCount() const { return values_.numel(); }

  // GPT-2 initialization from `seed`: matrices N(0, 0.02), residual output
  // projections N(0, 0.02/√(2L)) with L the effective depth, layers ×
  // passes (every pass adds to the stream), learned positions N(0, 0.01), gains 1,
  // biases 0. Drawn on the host, so every backend starts identical.
  void Initialize(uint64_t seed);
  void ZeroGrad();

  // tokens: (B·T) i32 on the device. Returns logits (B·T, V). With learned
  // positions the first call for a (B, T) allocates that shape's position
  // ids (see position_ids_), so it must not be the first inside a captured
  // step (CaptureGraph): run the same shape eagerly first, as the trainer's
  // warm-up does. Dies with a message when the device is out of memory.
  Var Logits(Tape& tape, Tensor tokens, int64_t batch, int64_t time) const;
  // Per-token cross-entropy (B·T), nats.
  Var Losses(Tape& tape, Tensor tokens, Tensor targets, int64_t batch, int64_t time) const;

  // Multi-token prediction (defined in engine/model/mtp.cc). The next-token
  // losses (B·T) as Losses, and each MTP depth's per-row losses (B·T): row
  // t of depth d predicts targets[t] from the main stream at t − d and the
  // tokens t − d + 1 … t; rows t < d of each sequence have no such stream
  // and must not be scored. Without MTP, `depths` is empty.
  struct DepthLosses {
    Var next_token;
    std::vector<Var> depths;  // D, depth d at index d − 1
  };
  DepthLosses AllLosses(Tape& tape, Tensor tokens, Tensor targets, int64_t batch,
                        int64_t time) const;
  // What a training step minimizes: the mean next-token loss plus
  // mtp_weight × the mean over depths of each depth's mean over its scored
  // rows; `next_token` is the mean next-token loss alone (what training
  // reports). Without MTP both are Mean(Losses(...)) in value, to rounding
  // (HeadLoss takes the loss with its gradient where the backend asks).
  struct TrainingLoss {
    Var total;
    Var next_token;
  };
  TrainingLoss TrainingObjective(Tape& tape, Tensor tokens, Tensor targets, int64_t batch,
                                 int64_t time) const;
  // Mixture of experts (engine/model/moe.h); no-ops for a dense model.
  // After each optimizer step: the routers' bias balancing, on the device.
  void BalanceExperts();
  // The routing statistics of the last balanced step (reads the device).
  MoeStats RoutingStats() const;

 private:
  struct Block {
    Tensor ln1_gain, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
    Tensor ln2_gain, ln2_bias, up_weight, up_bias, gate_weight, gate_bias;
    Tensor ff_proj_weight, ff_proj_bias;
    LatentAttentionWeights latent;  // attention: latent (qkv_weight, qkv_bias empty)
    // own_keys: qkv_weight/qkv_bias are the query's alone, (C, C) and (C).
    bool borrows_keys = false;
    int moe = -1;  // index into moe_, or -1: the dense feed-forward
  };

  Model(const ModelConfig& config, Backend& backend)
      : config_(config), layout_(config), backend_(backend) {}
  absl::Status Allocate();
  Var Param(Tape& tape, const Tensor& t) const;
  // AllLosses with each stream's loss made by head(normed, d): d = 0 the
  // next-token stream, d ≥ 1 MTP depth d.
  DepthLosses StreamLosses(Tape& tape, Tensor tokens, int64_t batch, int64_t time,
                           const std::function<Var(Var, size_t)>& head) const;
  Var Norm(Tape& tape, Var x, const Tensor& gain, const Tensor& bias) const;
  // x + residual and its norm, in one fused op (AddLayerNorm, AddRmsNorm).
  NormedSum AddNorm(Tape& tape, Var x, Var residual, const Tensor& gain,
                    const Tensor& bias) const;
  // One block on the residual stream in.sum, whose first norm in.normed the
  // caller made. Returns the stream after the block and its norm by
  // next_gain and next_bias (the next block's first norm or the final norm),
  // made together with the block's last residual add.
  // keys: the packed qkv of the last owning block of this pass, which an
  // owning block sets and a borrowing block reads.
  NormedSum BlockForward(Tape& tape, const Block& b, NormedSum in, const Tensor& next_gain,
                         const Tensor& next_bias, int64_t batch, int64_t time,
                         Var* keys) const;
  // The learned-position ids of a (B, T) forward, created on first use.
  const Tensor& PositionIds(int64_t batch, int64_t time) const;
  // The main model's stream after its last block: the residual sum and its
  // final norm (what the head reads).
  NormedSum Stream(Tape& tape, Tensor tokens, int64_t batch, int64_t time) const;

  // Multi-token prediction (engine/model/mtp.cc): one depth's modules.
  struct MtpDepth {
    Tensor hidden_gain, hidden_bias, embed_gain, embed_bias;  // input norms
    Tensor hidden_weight, embed_weight;                       // merge: (C, C) each
    Tensor final_gain, final_bias;                            // before the shared head
  };
  // The (B, T) constants of the MTP loss, created on first use: the shift
  // ids (B·T i32: row t reads row t − 1 of its sequence, row 0 itself) then
  // D scored-row masks (B·T f32 each, pre-scaled so that their Mean is the
  // depth's weighted share of the training loss).
  const Tensor& MtpConstants(int64_t batch, int64_t time) const;

  ModelConfig config_;
  ParameterLayout layout_;
  Backend& backend_;
  void* value_buffer_ = nullptr;
  void* grad_buffer_ = nullptr;
  void* table_buffer_ = nullptr;  // rope cos/sin
  Tensor values_, grads_;
  std::vector<Parameter> parameters_;
  Tensor embed_, positions_, final_gain_, final_bias_;
  std::vector<Block> blocks_;
  std::vector<Block> mtp_blocks_;  // depth d's block at d − 1
  std::vector<MtpDepth> mtp_;      // depth d at d − 1
  RopeTables rope_;
  // Learned-position ids by (B, T): (B·T) i32 device constants, row-major
  // t = i mod T, each uploaded once by the first forward of its shape and
  // freed with the model, so a step has no host copy and a captured step
  // keeps reading the same memory. One per shape the model has run
  // (training, evaluation): a few kilobytes each.
  mutable std::map<std::pair<int64_t, int64_t>, Tensor> position_ids_;
  // MtpConstants by (B, T), device memory freed with the model.
  mutable std::map<std::pair<int64_t, int64_t>, Tensor> mtp_constants_;
  std::vector<MoeWeights> moe_;  // one per MoE layer
  void* moe_buffer_ = nullptr;   // their load and last_load counters
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_MODEL_H_
