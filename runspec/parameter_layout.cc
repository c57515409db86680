#include "runspec/parameter_layout.h"

#include "absl/strings/str_cat.h"

namespace smallem {

// Appends slots in buffer order, each at the offset after the last.
class ParameterLayout::Builder {
 public:
  Builder(const ModelConfig& config, std::vector<ParameterSlot>& slots)
      : c_(config), slots_(slots) {}

  // Where the slots added next belong: the matrices of the blocks and the
  // MTP depths are Muon's, the embedding's and positions' are not.
  enum class Section { kOutside, kMainBlocks, kMtp };
  void Enter(Section section) { section_ = section; }

  int Add(std::string name, std::vector<int64_t> shape, ParameterInit init, bool decay) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t offset = slots_.empty() ? 0 : slots_.back().offset + slots_.back().numel;
    const bool hidden_matrix = section_ != Section::kOutside && shape.size() == 2;
    slots_.push_back(ParameterSlot{.name = std::move(name), .shape = std::move(shape),
                                   .init = init, .decay = decay,
                                   .hidden_matrix = hidden_matrix, .trained = true,
                                   .mtp = section_ == Section::kMtp, .offset = offset,
                                   .numel = numel, .active = numel});
    return static_cast<int>(slots_.size()) - 1;
  }

  // A routed-expert stack (E, …): a token uses top_k of its E experts.
  int Routed(int slot) {
    ParameterSlot& s = slots_[slot];
    s.active = s.numel / c_.moe.experts * c_.moe.top_k;
    return slot;
  }

  // A buffer kept in the parameter buffer but not trained.
  int Buffer(int slot) {
    slots_[slot].trained = false;
    slots_[slot].active = 0;
    return slot;
  }

  NormSlots Norm(const std::string& prefix) {
    NormSlots n{.gain = Add(prefix + ".gain", {c_.embed}, ParameterInit::kOne, false)};
    if (c_.architecture.norm == NormKind::kLayer) {
      n.bias = Add(prefix + ".bias", {c_.embed}, ParameterInit::kZero, false);
    }
    return n;
  }

  // Block `prefix`; `layer` its main layer, or −1 for an MTP depth's block,
  // which always owns its keys and is always dense.
  BlockSlots Block(const std::string& prefix, int64_t layer) {
    const int64_t C = c_.embed;
    const bool bias = c_.architecture.bias;
    const std::string b = prefix + ".";
    BlockSlots s;
    s.ln1 = Norm(b + "ln1");
    if (c_.architecture.attention == AttentionKind::kLatent) {
      s.latent = LatentAttention(b + "attn.");
    } else {
      s.borrows_keys = layer >= 0 && !c_.owns_keys(layer);
      auto matrix = [&](const char* p) {
        return Add(absl::StrCat(b, "attn.", p, ".weight"), {C, C}, ParameterInit::kNormal, true);
      };
      auto bias_of = [&](const char* p) {
        return Add(absl::StrCat(b, "attn.", p, ".bias"), {C}, ParameterInit::kZero, false);
      };
      // The three matrices, then the three biases: each set adjacent.
      s.query = matrix("query");
      if (!s.borrows_keys) {
        s.key = matrix("key");
        s.value = matrix("value");
      }
      if (bias) {
        s.query_bias = bias_of("query");
        if (!s.borrows_keys) {
          s.key_bias = bias_of("key");
          s.value_bias = bias_of("value");
        }
      }
    }
    s.proj = Add(b + "attn.proj.weight", {C, C}, ParameterInit::kResidual, true);
    if (bias) s.proj_bias = Add(b + "attn.proj.bias", {C}, ParameterInit::kZero, false);
    s.ln2 = Norm(b + "ln2");
    if (layer >= 0 && c_.moe.IsMoeLayer(layer)) {
      s.is_moe = true;
      s.moe = Moe(b + "ff.");
      return s;
    }
    const int64_t F = c_.ff_hidden();
    s.up = Add(b + "ff.up.weight", {F, C}, ParameterInit::kNormal, true);
    if (bias) s.up_bias = Add(b + "ff.up.bias", {F}, ParameterInit::kZero, false);
    if (c_.architecture.feed_forward == FeedForwardKind::kSwiGlu) {
      s.gate = Add(b + "ff.gate.weight", {F, C}, ParameterInit::kNormal, true);
      if (bias) s.gate_bias = Add(b + "ff.gate.bias", {F}, ParameterInit::kZero, false);
    }
    s.ff_proj = Add(b + "ff.proj.weight", {C, F}, ParameterInit::kResidual, true);
    if (bias) s.ff_proj_bias = Add(b + "ff.proj.bias", {C}, ParameterInit::kZero, false);
    return s;
  }

 private:
  // Shapes as engine/model/latent_attention.h derives them; no biases, and
  // the latent norms are gains only whatever the block's norm.
  LatentAttentionSlots LatentAttention(const std::string& a) {
    const int64_t C = c_.embed, H = c_.heads, D = c_.head_dim();
    const int64_t R = c_.latent_rope_dim(), L = c_.architecture.kv_latent;
    const int64_t Q = c_.architecture.q_latent;
    constexpr ParameterInit kNormal = ParameterInit::kNormal;
    LatentAttentionSlots s;
    if (Q > 0) {
      s.query_down = Add(a + "query_down.weight", {Q, C}, kNormal, true);
      s.query_norm = Add(a + "query_norm.gain", {Q}, ParameterInit::kOne, false);
      s.query = Add(a + "query_up.weight", {H * D, Q}, kNormal, true);
    } else {
      s.query = Add(a + "query.weight", {H * D, C}, kNormal, true);
    }
    s.kv_down = Add(a + "kv_down.weight", {L, C}, kNormal, true);
    s.kv_norm = Add(a + "kv_norm.gain", {L}, ParameterInit::kOne, false);
    s.kv_up = Add(a + "kv_up.weight", {H * (2 * D - R), L}, kNormal, true);
    s.key_rope = Add(a + "key_rope.weight", {R, C}, kNormal, true);
    return s;
  }

  MoeSlots Moe(const std::string& f) {
    const int64_t C = c_.embed, E = c_.moe.experts, W = c_.moe.Width(c_.ff_hidden());
    const int64_t S = c_.moe.shared;
    const bool swiglu = c_.architecture.feed_forward == FeedForwardKind::kSwiGlu;
    constexpr ParameterInit kNormal = ParameterInit::kNormal;
    MoeSlots s;
    s.router = Add(f + "router.weight", {E, C}, kNormal, true);
    // The selection bias only selects; the balancing sets it, not a gradient.
    s.router_bias = Buffer(Add(f + "router.bias", {E}, ParameterInit::kZero, false));
    s.experts_up = Routed(Add(f + "experts.up.weight", {E, W, C}, kNormal, true));
    if (swiglu) s.experts_gate = Routed(Add(f + "experts.gate.weight", {E, W, C}, kNormal, true));
    s.experts_proj =
        Routed(Add(f + "experts.proj.weight", {E, C, W}, ParameterInit::kResidual, true));
    if (S > 0) {
      s.shared_up = Add(f + "shared.up.weight", {S * W, C}, kNormal, true);
      if (swiglu) s.shared_gate = Add(f + "shared.gate.weight", {S * W, C}, kNormal, true);
      s.shared_proj = Add(f + "shared.proj.weight", {C, S * W}, ParameterInit::kResidual, true);
    }
    return s;
  }

  const ModelConfig& c_;
  std::vector<ParameterSlot>& slots_;
  Section section_ = Section::kOutside;
};

ParameterLayout::ParameterLayout(const ModelConfig& config) {
  Builder add(config, slots_);
  embed_ = add.Add("embed.weight", {config.vocab, config.embed}, ParameterInit::kNormal, true);
  if (config.architecture.positions == PositionKind::kLearned) {
    positions_ = add.Add("positions.weight", {config.context, config.embed},
                         ParameterInit::kPositions, true);
  }
  using Section = Builder::Section;
  add.Enter(Section::kMainBlocks);
  const std::vector<std::string> prefixes = BlockPrefixes(config);
  for (int64_t i = 0; i < config.layers; ++i) blocks_.push_back(add.Block(prefixes[i], i));
  // The depths' blocks follow the main blocks and their other modules the
  // final norm: the order of the files written before.
  add.Enter(Section::kMtp);
  mtp_.resize(config.mtp);
  for (int64_t d = 1; d <= config.mtp; ++d) {
    mtp_[d - 1].block = add.Block(prefixes[config.layers + d - 1], -1);
  }
  add.Enter(Section::kOutside);
  final_norm_ = add.Norm("final_norm");
  add.Enter(Section::kMtp);
  for (int64_t d = 1; d <= config.mtp; ++d) {
    const std::string m = MtpPrefix(d);
    MtpSlots& s = mtp_[d - 1];
    s.hidden_norm = add.Norm(m + ".hidden_norm");
    s.embed_norm = add.Norm(m + ".embed_norm");
    s.merge_hidden = add.Add(m + ".merge.hidden.weight", {config.embed, config.embed},
                             ParameterInit::kNormal, true);
    s.merge_embed = add.Add(m + ".merge.embed.weight", {config.embed, config.embed},
                            ParameterInit::kNormal, true);
    s.final_norm = add.Norm(m + ".final_norm");
  }
}

int64_t ParameterLayout::ParameterCount() const {
  return slots_.empty() ? 0 : slots_.back().offset + slots_.back().numel;
}

int64_t ParameterLayout::TotalParameterCount() const {
  int64_t n = 0;
  for (const ParameterSlot& s : slots_) n += s.trained ? s.numel : 0;
  return n;
}

int64_t ParameterLayout::ActiveParameterCount() const {
  int64_t n = 0;
  for (const ParameterSlot& s : slots_) n += s.active;
  return n;
}

int64_t ParameterLayout::MtpParameterCount() const {
  int64_t n = 0;
  for (const ParameterSlot& s : slots_) n += s.mtp ? s.numel : 0;
  return n;
}

std::string MtpPrefix(int64_t depth) { return absl::StrCat("mtp.", depth); }

std::vector<std::string> BlockPrefixes(const ModelConfig& config) {
  std::vector<std::string> prefixes;
  for (int64_t i = 0; i < config.layers; ++i) prefixes.push_back(absl::StrCat("blocks.", i));
  for (int64_t d = 1; d <= config.mtp; ++d) prefixes.push_back(MtpPrefix(d) + ".block");
  return prefixes;
}

}  // namespace smallem
