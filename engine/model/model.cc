#include "engine/model/model.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "engine/model/mtp.h"
#include "engine/model/shared_keys.h"
#include "engine/random.h"

namespace smallem {
namespace {

enum class Init { kNormal, kResidual, kPositions, kOne, kZero };

struct Slot {
  std::string name;
  Shape shape;
  Init init;
  bool decay;
  int64_t offset = 0;  // elements into the buffer
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const ModelConfig& config,
                                                     Backend& backend) {
  RETURN_IF_ERROR(config.Validate());
  if (absl::Status s = backend.CheckAttentionHeadDim(config.head_dim()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.message(), " on ", backend.DeviceClass(), ": embed ", config.embed, " / heads ",
        config.heads, "; change embed or heads"));
  }
  std::unique_ptr<Model> model(new Model(config, backend));
  RETURN_IF_ERROR(model->Allocate());
  return model;
}

Model::~Model() {
  for (void* p : {value_buffer_, grad_buffer_, table_buffer_, moe_buffer_}) {
    if (p) backend_.Free(p);
  }
  for (const auto& [shape, ids] : position_ids_) {
    if (ids.data != nullptr) backend_.Free(ids.data);
  }
  for (const auto& [shape, constants] : mtp_constants_) {
    if (constants.data != nullptr) backend_.Free(constants.data);
  }
}

absl::Status Model::Allocate() {
  const ModelConfig& c = config_;
  const int64_t C = c.embed, F = c.ff_hidden();
  const bool layer = c.architecture.norm == NormKind::kLayer;
  const bool bias = c.architecture.bias;
  const bool swiglu = c.architecture.feed_forward == FeedForwardKind::kSwiGlu;
  const bool latent = c.architecture.attention == AttentionKind::kLatent;
  // A block's layer index ("blocks.i"), or −1 for an MTP depth's block
  // ("mtp.d.block"), which always owns its keys and is always dense.
  auto main_index = [](const std::string& prefix) -> int64_t {
    return prefix.starts_with("blocks.") ? std::stoll(prefix.substr(7)) : -1;
  };
  auto owns_keys = [&](const std::string& prefix) {
    return main_index(prefix) < 0 || c.owns_keys(main_index(prefix));
  };

  std::vector<Slot> slots;
  auto add = [&](std::string name, Shape shape, Init init, bool decay) {
    slots.push_back(Slot{std::move(name), shape, init, decay});
  };
  auto norm = [&](const std::string& prefix) {
    add(prefix + ".gain", {C}, Init::kOne, false);
    if (layer) add(prefix + ".bias", {C}, Init::kZero, false);
  };
  add("embed.weight", {c.vocab, C}, Init::kNormal, true);
  if (c.architecture.positions == PositionKind::kLearned) {
    add("positions.weight", {c.context, C}, Init::kPositions, true);
  }
  // The main blocks, then each MTP depth's (engine/model/mtp.h).
  for (const std::string& b : BlockPrefixes(c)) {
    norm(b + ".ln1");
    if (latent) {
      for (const LatentAttentionSlot& s : LatentAttentionSlots(c, b)) {
        add(s.name, s.shape, Init::kNormal, s.decay);
      }
    } else {
      // query, key, value adjacent: one (3C, C) matrix, one (3C) bias. A
      // layer that borrows keys (own_keys) has the query's alone.
      const std::vector<const char*> projections =
          owns_keys(b) ? std::vector<const char*>{"query", "key", "value"}
                       : std::vector<const char*>{"query"};
      for (const char* p : projections) {
        add(absl::StrCat(b, ".attn.", p, ".weight"), {C, C}, Init::kNormal, true);
      }
      if (bias) {
        for (const char* p : projections) {
          add(absl::StrCat(b, ".attn.", p, ".bias"), {C}, Init::kZero, false);
        }
      }
    }
    add(b + ".attn.proj.weight", {C, C}, Init::kResidual, true);
    if (bias) add(b + ".attn.proj.bias", {C}, Init::kZero, false);
    norm(b + ".ln2");
    if (main_index(b) >= 0 && c.moe.IsMoeLayer(main_index(b))) {
      // engine/model/moe.h; experts carry no biases
      const int64_t E = c.moe.experts, W = c.moe.Width(F), S = c.moe.shared;
      add(b + ".ff.router.weight", {E, C}, Init::kNormal, true);
      add(b + ".ff.router.bias", {E}, Init::kZero, false);  // selection only, not trained
      add(b + ".ff.experts.up.weight", {E, W, C}, Init::kNormal, true);
      if (swiglu) add(b + ".ff.experts.gate.weight", {E, W, C}, Init::kNormal, true);
      add(b + ".ff.experts.proj.weight", {E, C, W}, Init::kResidual, true);
      if (S > 0) {
        add(b + ".ff.shared.up.weight", {S * W, C}, Init::kNormal, true);
        if (swiglu) add(b + ".ff.shared.gate.weight", {S * W, C}, Init::kNormal, true);
        add(b + ".ff.shared.proj.weight", {C, S * W}, Init::kResidual, true);
      }
      continue;
    }
    add(b + ".ff.up.weight", {F, C}, Init::kNormal, true);
    if (bias) add(b + ".ff.up.bias", {F}, Init::kZero, false);
    if (swiglu) {
      add(b + ".ff.gate.weight", {F, C}, Init::kNormal, true);
      if (bias) add(b + ".ff.gate.bias", {F}, Init::kZero, false);
    }
    add(b + ".ff.proj.weight", {C, F}, Init::kResidual, true);
    if (bias) add(b + ".ff.proj.bias", {C}, Init::kZero, false);
  }
  norm("final_norm");
  for (int64_t d = 1; d <= c.mtp; ++d) {
    const std::string m = MtpPrefix(d);
    norm(m + ".hidden_norm");
    norm(m + ".embed_norm");
    add(m + ".merge.hidden.weight", {C, C}, Init::kNormal, true);
    add(m + ".merge.embed.weight", {C, C}, Init::kNormal, true);
    norm(m + ".final_norm");
  }

  int64_t total = 0;
  for (Slot& s : slots) {
    s.offset = total;
    total += s.shape.numel();
  }
  CHECK_EQ(total, c.ParameterCount()) << "parameter layout disagrees with ModelConfig";

  const size_t bytes = static_cast<size_t>(total) * sizeof(float);
  ASSIGN_OR_RETURN(value_buffer_, backend_.Allocate(bytes));
  ASSIGN_OR_RETURN(grad_buffer_, backend_.Allocate(bytes));
  values_ = Tensor{.data = value_buffer_, .shape = {total}};
  grads_ = Tensor{.data = grad_buffer_, .shape = {total}};

  for (const Slot& s : slots) {
    parameters_.push_back(Parameter{
        .name = s.name,
        .value = Tensor{.data = values_.f32() + s.offset, .shape = s.shape},
        .grad = Tensor{.data = grads_.f32() + s.offset, .shape = s.shape},
        .decay = s.decay});
  }

  // Structured views the forward pass uses.
  auto view = [&](const std::string& name, int64_t count = 1) -> Tensor {
    const Parameter* p = Find(name);
    if (!p) return Tensor{};
    Tensor t = p->value;
    if (count > 1) t.shape = t.shape.rank() == 2 ? Shape{count * t.shape[0], t.shape[1]}
                                                 : Shape{count * t.shape[0]};
    return t;
  };
  embed_ = view("embed.weight");
  positions_ = view("positions.weight");
  final_gain_ = view("final_norm.gain");
  final_bias_ = view("final_norm.bias");
  for (const std::string& b : BlockPrefixes(c)) {
    // The main blocks, then the MTP depths'.
    const bool main_block = static_cast<int64_t>(blocks_.size()) < c.layers;
    std::vector<Block>& stack = main_block ? blocks_ : mtp_blocks_;
    // MTP depths' blocks keep the dense feed-forward.
    const int64_t main_layer = main_block ? static_cast<int64_t>(blocks_.size()) : -1;
    const int64_t packed = owns_keys(b) ? 3 : 1;
    stack.push_back(Block{
        .ln1_gain = view(b + ".ln1.gain"), .ln1_bias = view(b + ".ln1.bias"),
        .qkv_weight = view(b + ".attn.query.weight", packed),
        .qkv_bias = view(b + ".attn.query.bias", packed),
        .proj_weight = view(b + ".attn.proj.weight"), .proj_bias = view(b + ".attn.proj.bias"),
        .ln2_gain = view(b + ".ln2.gain"), .ln2_bias = view(b + ".ln2.bias"),
        .up_weight = view(b + ".ff.up.weight"), .up_bias = view(b + ".ff.up.bias"),
        .gate_weight = view(b + ".ff.gate.weight"), .gate_bias = view(b + ".ff.gate.bias"),
        .ff_proj_weight = view(b + ".ff.proj.weight"),
        .ff_proj_bias = view(b + ".ff.proj.bias"),
        .borrows_keys = !owns_keys(b)});
    if (latent) {
      stack.back().latent =
          LatentAttentionViews([&](const std::string& name) { return view(name); }, b);
      stack.back().qkv_weight = Tensor{};
    }
    if (main_layer >= 0 && c.moe.IsMoeLayer(main_layer)) {
      stack.back().moe = static_cast<int>(moe_.size());
      moe_.push_back(MoeWeights{
          .router = view(b + ".ff.router.weight"), .bias = view(b + ".ff.router.bias"),
          .up = view(b + ".ff.experts.up.weight"), .gate = view(b + ".ff.experts.gate.weight"),
          .proj = view(b + ".ff.experts.proj.weight"),
          .shared_up = view(b + ".ff.shared.up.weight"),
          .shared_gate = view(b + ".ff.shared.gate.weight"),
          .shared_proj = view(b + ".ff.shared.proj.weight")});
    }
  }
  if (!moe_.empty()) {
    // Each layer's load and last_load counters, (E) f32 each, zeroed.
    const int64_t E = c.moe.experts;
    const int64_t count = 2 * E * static_cast<int64_t>(moe_.size());
    ASSIGN_OR_RETURN(moe_buffer_, backend_.Allocate(count * sizeof(float)));
    float* counters = static_cast<float*>(moe_buffer_);
    for (MoeWeights& w : moe_) {
      w.load = Tensor{.data = counters, .shape = {E}};
      w.last_load = Tensor{.data = counters + E, .shape = {E}};
      counters += 2 * E;
    }
  }
  ViewMtp();

  if (c.architecture.positions == PositionKind::kRope) {
    // cos/sin of m·10000^(−2i/D), computed on the host; latent attention
    // rotates only its R-channel parts, so its tables use D = R.
    const int64_t rotary_dim = latent ? c.latent_rope_dim() : c.head_dim();
    const int64_t half = rotary_dim / 2;
    std::vector<float> table(2 * c.context * half);
    for (int64_t m = 0; m < c.context; ++m) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            m * std::pow(10000.0, -2.0 * static_cast<double>(i) / rotary_dim);
        table[m * half + i] = static_cast<float>(std::cos(angle));
        table[(c.context + m) * half + i] = static_cast<float>(std::sin(angle));
      }
    }
    ASSIGN_OR_RETURN(table_buffer_, backend_.Allocate(table.size() * sizeof(float)));
    backend_.CopyToDevice(table_buffer_, table.data(), table.size() * sizeof(float));
    rope_.cos = Tensor{.data = table_buffer_, .shape = {c.context, half}};
    rope_.sin = Tensor{.data = static_cast<float*>(table_buffer_) + c.context * half,
                       .shape = {c.context, half}};
  }
  return absl::OkStatus();
}

const Model::Parameter* Model::Find(const std::string& name) const {
  for (const Parameter& p : parameters_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void Model::Initialize(uint64_t seed) {
  Rng rng(seed);
  std::vector<float> host(values_.numel());
  const double residual = 0.02 / std::sqrt(2.0 * config_.effective_depth());
  for (const Parameter& p : parameters_) {
    float* dst = host.data() + (p.value.f32() - values_.f32());
    const bool is_bias = p.name.ends_with(".bias");
    const bool is_gain = p.name.ends_with(".gain");
    double stddev = 0.02;
    if (p.name.ends_with("proj.weight")) stddev = residual;
    if (p.name == "positions.weight") stddev = 0.01;
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      dst[i] = is_gain ? 1.0f : is_bias ? 0.0f : static_cast<float>(stddev * rng.Normal());
    }
  }
  backend_.CopyToDevice(values_.data, host.data(), values_.bytes());
}

void Model::ZeroGrad() { backend_.Fill(grads_, 0.0f); }

Var Model::Param(Tape& tape, const Tensor& t) const {
  if (t.empty()) return Var{};
  Tensor grad = t;
  grad.data = grads_.f32() + (t.f32() - values_.f32());
  return tape.Param(t, grad);
}

Var Model::Norm(Tape& tape, Var x, const Tensor& gain, const Tensor& bias) const {
  if (config_.architecture.norm == NormKind::kLayer) {
    return LayerNorm(tape, x, Param(tape, gain), Param(tape, bias));
  }
  return RmsNorm(tape, x, Param(tape, gain));
}

NormedSum Model::AddNorm(Tape& tape, Var x, Var residual, const Tensor& gain,
                         const Tensor& bias) const {
  if (config_.architecture.norm == NormKind::kLayer) {
    return AddLayerNorm(tape, x, residual, Param(tape, gain), Param(tape, bias));
  }
  return AddRmsNorm(tape, x, residual, Param(tape, gain));
}

NormedSum Model::BlockForward(Tape& tape, const Block& b, NormedSum in, const Tensor& next_gain,
                              const Tensor& next_bias, int64_t batch, int64_t time,
                              Var* keys) const {
  const ModelConfig& c = config_;
  Var attn;
  if (c.architecture.attention == AttentionKind::kLatent) {
    attn = LatentAttentionForward(
        tape, [&](const Tensor& t) { return Param(tape, t); }, c, b.latent, rope_, in.normed,
        batch, time);
  } else {
    const bool rope = c.architecture.positions == PositionKind::kRope;
    Var qkv;
    if (b.borrows_keys) {
      qkv = BorrowedQkv(tape, in.normed, Param(tape, b.qkv_weight), Param(tape, b.qkv_bias),
                        *keys, rope ? &rope_ : nullptr, time, c.head_dim());
    } else {
      qkv = Linear(tape, in.normed, Param(tape, b.qkv_weight), Param(tape, b.qkv_bias));
      if (rope) {
        // Rotate queries and keys (the first 2C channels); values pass through.
        qkv = Rope(tape, qkv, rope_, time, c.head_dim(), 2 * c.embed);
      }
      *keys = qkv;
    }
    attn = Attention(tape, qkv, batch, time, c.heads);
  }
  Var proj = Linear(tape, attn, Param(tape, b.proj_weight), Param(tape, b.proj_bias));
  const NormedSum mid = AddNorm(tape, in.sum, proj, b.ln2_gain, b.ln2_bias);
  if (b.moe >= 0) {
    const Var ff = MoeFeedForward(
        tape, [&](const Tensor& t) { return Param(tape, t); }, c, moe_[b.moe], mid.normed);
    return AddNorm(tape, mid.sum, ff, next_gain, next_bias);
  }
  const bool swiglu = c.architecture.feed_forward == FeedForwardKind::kSwiGlu;  // GELU: BiasGelu
  Var up = Linear(tape, mid.normed, Param(tape, b.up_weight),
                  swiglu ? Param(tape, b.up_bias) : Var{});
  Var act;
  if (c.architecture.feed_forward == FeedForwardKind::kSwiGlu) {
    Var gate = Linear(tape, mid.normed, Param(tape, b.gate_weight), Param(tape, b.gate_bias));
    act = SwiGlu(tape, gate, up);
  } else {
    act = BiasGelu(tape, up, Param(tape, b.up_bias));
  }
  return AddNorm(tape, mid.sum,
                 Linear(tape, act, Param(tape, b.ff_proj_weight), Param(tape, b.ff_proj_bias)),
                 next_gain, next_bias);
}

const Tensor& Model::PositionIds(int64_t batch, int64_t time) const {
  auto [it, inserted] = position_ids_.try_emplace({batch, time});
  if (!inserted) return it->second;
  const int64_t n = batch * time;
  std::vector<int32_t> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<int32_t>(i % time);
  absl::StatusOr<void*> data = backend_.Allocate(host.size() * sizeof(int32_t));
  CHECK(data.ok()) << "position ids for (B " << batch << ", T " << time
                   << "): " << data.status().message();
  it->second = Tensor{.data = *data, .shape = {n}, .dtype = DType::kI32};
  backend_.CopyToDevice(it->second.data, host.data(), it->second.bytes());
  return it->second;
}

Var Model::Logits(Tape& tape, Tensor tokens, int64_t batch, int64_t time) const {
  // f32 logits: the loss reads them, and bf16 would round each by up to
  // 2⁻⁸ of its size.
  return Linear(tape, Stream(tape, tokens, batch, time).normed, Param(tape, embed_), Var{},
                Output::kF32);
}

NormedSum Model::Stream(Tape& tape, Tensor tokens, int64_t batch, int64_t time) const {
  const ModelConfig& c = config_;
  CHECK_LE(time, c.context) << "sequence longer than the context";
  CHECK_EQ(tokens.numel(), batch * time) << "tokens for (B, T)";
  // Each residual add is fused with the norm after it: the stream enters a
  // block already normalized by the block's first norm and leaves it
  // normalized by the next one (the final norm after the last block).
  // With passes the blocks repeat: step i of the unrolled stack is block
  // i mod L.
  const size_t L = blocks_.size();
  const size_t steps = L * static_cast<size_t>(c.architecture.passes);
  auto norm_gain = [&](size_t i) -> const Tensor& {
    return i < steps ? blocks_[i % L].ln1_gain : final_gain_;
  };
  auto norm_bias = [&](size_t i) -> const Tensor& {
    return i < steps ? blocks_[i % L].ln1_bias : final_bias_;
  };
  Var x = Embedding(tape, tape.Input(tokens), Param(tape, embed_));
  NormedSum stream;
  if (c.architecture.positions == PositionKind::kLearned) {
    stream = AddNorm(
        tape, x, Embedding(tape, tape.Input(PositionIds(batch, time)), Param(tape, positions_)),
        norm_gain(0), norm_bias(0));
  } else {
    stream = {.sum = x, .normed = Norm(tape, x, norm_gain(0), norm_bias(0))};
  }
  Var keys;  // the last owning block's packed qkv, within the current pass
  for (size_t i = 0; i < steps; ++i) {
    stream = BlockForward(tape, blocks_[i % L], stream, norm_gain(i + 1), norm_bias(i + 1), batch,
                          time, &keys);
  }
  return stream;
}

void Model::BalanceExperts() {
  for (const MoeWeights& w : moe_) MoeBalance(backend_, config_, w);
}

MoeStats Model::RoutingStats() const { return ReadMoeStats(backend_, moe_); }

Var Model::Losses(Tape& tape, Tensor tokens, Tensor targets, int64_t batch, int64_t time) const {
  return CrossEntropy(tape, Logits(tape, tokens, batch, time), tape.Input(targets));
}

}  // namespace smallem
