#include "engine/model/model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "engine/model/shared_keys.h"
#include "engine/random.h"

namespace smallem {
namespace {

// A slot's shape as the engine's (at most four dimensions).
Shape ToShape(const std::vector<int64_t>& d) {
  switch (d.size()) {
    case 1: return {d[0]};
    case 2: return {d[0], d[1]};
    case 3: return {d[0], d[1], d[2]};
    case 4: return {d[0], d[1], d[2], d[3]};
  }
  CHECK(false) << "parameter of rank " << d.size();
  return {};
}

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
  const int64_t total = layout_.ParameterCount();
  const size_t bytes = static_cast<size_t>(total) * sizeof(float);
  ASSIGN_OR_RETURN(value_buffer_, backend_.Allocate(bytes));
  ASSIGN_OR_RETURN(grad_buffer_, backend_.Allocate(bytes));
  values_ = Tensor{.data = value_buffer_, .shape = {total}};
  grads_ = Tensor{.data = grad_buffer_, .shape = {total}};

  for (const ParameterSlot& s : layout_.slots()) {
    const Shape shape = ToShape(s.shape);
    parameters_.push_back(Parameter{
        .name = s.name,
        .value = Tensor{.data = values_.f32() + s.offset, .shape = shape},
        .grad = Tensor{.data = grads_.f32() + s.offset, .shape = shape},
        .decay = s.decay,
        .hidden_matrix = s.hidden_matrix});
  }

  // Structured views the forward pass uses.
  auto view = [&](int slot) -> Tensor {
    return slot == kNoSlot ? Tensor{} : parameters_[slot].value;
  };
  // Slots first … first + count − 1, adjacent in the buffer, as one tensor
  // of count × the first's rows: the packed query, key and value.
  auto packed = [&](int first, int count) -> Tensor {
    if (first == kNoSlot) return Tensor{};
    Tensor t = view(first);
    const ParameterSlot& last = layout_.slot(first + count - 1);
    CHECK_EQ(last.offset, layout_.slot(first).offset + (count - 1) * t.numel())
        << "packed slots from " << layout_.slot(first).name << " are not adjacent";
    t.shape[0] *= count;
    return t;
  };
  auto block = [&](const BlockSlots& s) {
    const int packed_count = s.borrows_keys ? 1 : 3;
    Block b{.ln1_gain = view(s.ln1.gain), .ln1_bias = view(s.ln1.bias),
            .qkv_weight = packed(s.query, packed_count),
            .qkv_bias = packed(s.query_bias, packed_count),
            .proj_weight = view(s.proj), .proj_bias = view(s.proj_bias),
            .ln2_gain = view(s.ln2.gain), .ln2_bias = view(s.ln2.bias),
            .up_weight = view(s.up), .up_bias = view(s.up_bias),
            .gate_weight = view(s.gate), .gate_bias = view(s.gate_bias),
            .ff_proj_weight = view(s.ff_proj), .ff_proj_bias = view(s.ff_proj_bias),
            .latent = LatentAttentionViews(view, s.latent),
            .borrows_keys = s.borrows_keys};
    if (s.is_moe) {
      b.moe = static_cast<int>(moe_.size());
      moe_.push_back(MoeWeights{
          .router = view(s.moe.router), .bias = view(s.moe.router_bias),
          .up = view(s.moe.experts_up), .gate = view(s.moe.experts_gate),
          .proj = view(s.moe.experts_proj), .shared_up = view(s.moe.shared_up),
          .shared_gate = view(s.moe.shared_gate), .shared_proj = view(s.moe.shared_proj)});
    }
    return b;
  };
  embed_ = view(layout_.embed());
  positions_ = view(layout_.positions());
  final_gain_ = view(layout_.final_norm().gain);
  final_bias_ = view(layout_.final_norm().bias);
  for (const BlockSlots& s : layout_.blocks()) blocks_.push_back(block(s));
  for (const MtpSlots& d : layout_.mtp()) {
    mtp_blocks_.push_back(block(d.block));
    mtp_.push_back(MtpDepth{.hidden_gain = view(d.hidden_norm.gain),
                            .hidden_bias = view(d.hidden_norm.bias),
                            .embed_gain = view(d.embed_norm.gain),
                            .embed_bias = view(d.embed_norm.bias),
                            .hidden_weight = view(d.merge_hidden),
                            .embed_weight = view(d.merge_embed),
                            .final_gain = view(d.final_norm.gain),
                            .final_bias = view(d.final_norm.bias)});
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

  if (c.architecture.positions == PositionKind::kRope) {
    // cos/sin of m·10000^(−2i/D), computed on the host; latent attention
    // rotates only its R-channel parts, so its tables use D = R.
    const bool latent = c.architecture.attention == AttentionKind::kLatent;
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
  for (const ParameterSlot& s : layout_.slots()) {
    float* dst = host.data() + s.offset;
    double stddev = 0.0;
    switch (s.init) {
      case ParameterInit::kOne: std::fill(dst, dst + s.numel, 1.0f); continue;
      case ParameterInit::kZero: std::fill(dst, dst + s.numel, 0.0f); continue;
      case ParameterInit::kNormal: stddev = 0.02; break;
      case ParameterInit::kResidual: stddev = residual; break;
      case ParameterInit::kPositions: stddev = 0.01; break;
    }
    for (int64_t i = 0; i < s.numel; ++i) dst[i] = static_cast<float>(stddev * rng.Normal());
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
