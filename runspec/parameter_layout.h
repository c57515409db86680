// ParameterLayout: every parameter of a model, once, in the order of the
// parameter buffer and of the weights file (docs/architecture.md § The
// formats). Each slot carries what its users need: the file's name, the
// shape, how it is initialized, whether weight decay applies, whether Muon
// or AdamW updates it, and how much of it one token uses. ModelConfig's
// counts are its sums; Model allocates and views its slots; the weights file
// and the checkpoint are written under its names. Built without tensors, so
// the coordinator can count a grid's parameters.
//
// Order, for L layers and D MTP depths:
//   embed.weight, positions.weight (learned positions only)
//   blocks.0.* … blocks.L−1.*, mtp.1.block.* … mtp.D.block.*   (BlockSlots order)
//   final_norm.*
//   per depth d: mtp.d.hidden_norm.*, mtp.d.embed_norm.*, mtp.d.merge.hidden.weight,
//                mtp.d.merge.embed.weight, mtp.d.final_norm.*
// A block: ln1, its attention (query, key, value adjacent — one (3C, C)
// matrix and one (3C) bias, so one GEMM makes the packed qkv; a layer that
// borrows keys has the query alone; latent attention's weights instead,
// engine/model/latent_attention.h), attn.proj, ln2, then the dense
// feed-forward (ff.up, ff.gate with SwiGLU, ff.proj) or a MoE layer's
// (ff.router, ff.experts.*, ff.shared.*; engine/model/moe.h).
// A ParameterLayout is immutable once built; share it freely.
#ifndef SMALLEM_RUNSPEC_PARAMETER_LAYOUT_H_
#define SMALLEM_RUNSPEC_PARAMETER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runspec/model_config.h"

namespace smallem {

// How Model::Initialize fills a slot (GPT-2's initialization).
enum class ParameterInit {
  kNormal,     // N(0, 0.02)
  kResidual,   // N(0, 0.02/√(2L)): projections into the residual stream
  kPositions,  // N(0, 0.01): learned positions
  kOne,        // norm gains
  kZero,       // biases
};

struct ParameterSlot {
  std::string name;            // the weights file's: "blocks.0.attn.query.weight"
  std::vector<int64_t> shape;  // row-major, last dimension contiguous
  ParameterInit init;
  bool decay;  // weight decay applies (matrices and embeddings)
  // Muon updates it when the optimizer is Muon (engine/optim/muon.h): the
  // 2-D matrices of the blocks and MTP depths; AdamW the rest (embedding,
  // positions, gains, biases, the experts' 3-D stacks).
  bool hidden_matrix;
  // false: a MoE router's selection bias, a buffer the balancing sets, not
  // a trained parameter (in the buffer, out of the trained counts).
  bool trained;
  bool mtp;        // part of an MTP depth: trained, never used to generate
  int64_t offset;  // elements into the parameter buffer
  int64_t numel;
  // Elements one token uses: numel, or top_k/E of a routed-expert stack.
  int64_t active;
};

// Slot indices into ParameterLayout::slots(); kNoSlot where a config has
// no such parameter.
inline constexpr int kNoSlot = -1;

struct NormSlots {
  int gain = kNoSlot;
  int bias = kNoSlot;  // LayerNorm only
};

// attention: latent (engine/model/latent_attention.h). query is the direct
// projection, or query_up with a query latent (q_latent > 0).
struct LatentAttentionSlots {
  int query = kNoSlot, query_down = kNoSlot, query_norm = kNoSlot;
  int kv_down = kNoSlot, kv_norm = kNoSlot, kv_up = kNoSlot, key_rope = kNoSlot;
};

// A MoE layer's feed-forward (engine/model/moe.h); experts carry no biases.
struct MoeSlots {
  int router = kNoSlot, router_bias = kNoSlot;
  int experts_up = kNoSlot, experts_gate = kNoSlot, experts_proj = kNoSlot;
  int shared_up = kNoSlot, shared_gate = kNoSlot, shared_proj = kNoSlot;  // shared > 0
};

struct BlockSlots {
  NormSlots ln1;
  // Multi-head attention: query, key and value at consecutive indices (and
  // offsets), as their biases; key and value absent in a borrowing layer.
  int query = kNoSlot, key = kNoSlot, value = kNoSlot;
  int query_bias = kNoSlot, key_bias = kNoSlot, value_bias = kNoSlot;
  LatentAttentionSlots latent;
  int proj = kNoSlot, proj_bias = kNoSlot;
  NormSlots ln2;
  // The dense feed-forward (absent in a MoE layer).
  int up = kNoSlot, up_bias = kNoSlot, gate = kNoSlot, gate_bias = kNoSlot;
  int ff_proj = kNoSlot, ff_proj_bias = kNoSlot;
  bool is_moe = false;
  MoeSlots moe;
  bool borrows_keys = false;  // own_keys: reads the last owner's keys and values
};

// One MTP depth's modules (engine/model/mtp.h).
struct MtpSlots {
  BlockSlots block;
  NormSlots hidden_norm, embed_norm;
  int merge_hidden = kNoSlot, merge_embed = kNoSlot;  // (C, C) each
  NormSlots final_norm;
};

class ParameterLayout {
 public:
  // REQUIRES: config.Validate() is OK (sizes positive, heads divide embed).
  explicit ParameterLayout(const ModelConfig& config);

  const std::vector<ParameterSlot>& slots() const { return slots_; }
  const ParameterSlot& slot(int index) const { return slots_[index]; }

  int embed() const { return embed_; }
  int positions() const { return positions_; }  // kNoSlot with RoPE
  const NormSlots& final_norm() const { return final_norm_; }
  const std::vector<BlockSlots>& blocks() const { return blocks_; }  // L
  const std::vector<MtpSlots>& mtp() const { return mtp_; }           // depth d at d − 1

  // Elements of the parameter buffer: every slot, selection biases included.
  int64_t ParameterCount() const;
  // The trained parameters (the selection biases left out).
  int64_t TotalParameterCount() const;
  // The trained parameters one token uses (routed experts: top_k of E).
  int64_t ActiveParameterCount() const;
  // The MTP depths' share of ParameterCount.
  int64_t MtpParameterCount() const;

 private:
  class Builder;

  std::vector<ParameterSlot> slots_;
  int embed_ = kNoSlot, positions_ = kNoSlot;
  NormSlots final_norm_;
  std::vector<BlockSlots> blocks_;
  std::vector<MtpSlots> mtp_;
};

// "mtp.d": the parameter-name prefix of depth d (1-based).
std::string MtpPrefix(int64_t depth);

// The parameter-name prefixes of every block in layout order: "blocks.0" …
// "blocks.L−1", then "mtp.1.block" … "mtp.D.block".
std::vector<std::string> BlockPrefixes(const ModelConfig& config);

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_PARAMETER_LAYOUT_H_
