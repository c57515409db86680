#include "engine/model/generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "engine/model/host_math.h"

namespace smallem {

Generator::Generator(const Model& model) : config_(model.config()) {
  weights_.resize(model.values().numel());
  model.backend().CopyToHost(weights_.data(), model.values().data, model.values().bytes());
  const ParameterLayout& layout = model.layout();
  auto at = [&](int slot) -> const float* {
    return slot == kNoSlot ? nullptr : weights_.data() + layout.slot(slot).offset;
  };
  embed_ = at(layout.embed());
  positions_ = at(layout.positions());
  final_gain_ = at(layout.final_norm().gain);
  final_bias_ = at(layout.final_norm().bias);
  const bool latent = config_.architecture.attention == AttentionKind::kLatent;
  for (const BlockSlots& b : layout.blocks()) {
    // qkv_w: the query, key and value matrices, adjacent (one (3C, C)
    // matrix; the query's alone in a borrowing layer), as their biases.
    layers_.push_back(Layer{
        .ln1_gain = at(b.ln1.gain), .ln1_bias = at(b.ln1.bias),
        .qkv_w = at(b.query), .qkv_b = at(b.query_bias),
        .proj_w = at(b.proj), .proj_b = at(b.proj_bias),
        .ln2_gain = at(b.ln2.gain), .ln2_bias = at(b.ln2.bias),
        .up_w = at(b.up), .up_b = at(b.up_bias),
        .gate_w = at(b.gate), .gate_b = at(b.gate_bias),
        .ff_proj_w = at(b.ff_proj), .ff_proj_b = at(b.ff_proj_bias),
        .owns_keys = !b.borrows_keys,
        .moe = MoeHostWeights{.router = at(b.moe.router),
                              .bias = at(b.moe.router_bias),
                              .up = at(b.moe.experts_up),
                              .gate = at(b.moe.experts_gate),
                              .proj = at(b.moe.experts_proj),
                              .shared_up = at(b.moe.shared_up),
                              .shared_gate = at(b.moe.shared_gate),
                              .shared_proj = at(b.moe.shared_proj)}});
  }
  if (latent) {
    latent_ = std::make_unique<LatentCache>(config_, layout, at);
  } else {
    const CacheLayout layout = LayoutFor(config_);
    for (int64_t s = 0; s < layout.stages; ++s) {
      stages_.push_back(CacheStage{.keys = std::vector<float>(config_.context * layout.width),
                                   .values = std::vector<float>(config_.context * layout.width)});
    }
  }
  logits_.resize(config_.vocab);
}

Generator::CacheLayout Generator::LayoutFor(const ModelConfig& config) {
  if (config.architecture.attention == AttentionKind::kLatent) {
    // One latent and one rotary key per layer (engine/model/latent_cache.h).
    return CacheLayout{.stages = config.layers,
                       .vectors_per_stage = 1,
                       .width = config.architecture.kv_latent + config.latent_rope_dim(),
                       .element_bytes = sizeof(float)};
  }
  return CacheLayout{.stages = config.architecture.passes * config.key_layers(),
                     .vectors_per_stage = 2,
                     .width = config.embed,
                     .element_bytes = sizeof(float)};
}

int64_t Generator::CacheBytesPerToken() const {
  if (latent_) return latent_->bytes_per_token();
  int64_t bytes = 0;
  for (const CacheStage& s : stages_) {
    bytes += static_cast<int64_t>((s.keys.size() + s.values.size()) * sizeof(float));
  }
  return bytes / config_.context;
}

void Generator::Reset() {
  window_.clear();
  length_ = next_position_ = head_ = 0;
}

void Generator::Norm(const float* x, const float* gain, const float* bias, float* out) const {
  const int64_t C = config_.embed;
  double mean = 0, sq = 0;
  if (config_.architecture.norm == NormKind::kLayer) {
    for (int64_t i = 0; i < C; ++i) mean += x[i];
    mean /= C;
  }
  for (int64_t i = 0; i < C; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float rstd = static_cast<float>(1.0 / std::sqrt(sq / C + 1e-5));
  for (int64_t i = 0; i < C; ++i) {
    out[i] = static_cast<float>(x[i] - mean) * rstd * gain[i] + (bias ? bias[i] : 0.0f);
  }
}

const std::vector<float>& Generator::Feed(int32_t token) {
  CHECK(token >= 0 && token < config_.vocab) << "token " << token;
  const bool rope = config_.architecture.positions == PositionKind::kRope;
  if (length_ == config_.context) {
    if (rope) {
      // Slide: the oldest row is overwritten by this token.
      head_ = (head_ + 1) % config_.context;
      --length_;
      window_.erase(window_.begin());
    } else {
      // Learned positions end at the context: re-encode the recent window.
      std::vector<int32_t> keep(window_.end() - (config_.context - 1), window_.end());
      Reset();
      for (int32_t t : keep) Step(t, next_position_++);
    }
  }
  Step(token, rope ? next_position_ : length_);
  ++next_position_;
  return logits_;
}

void Generator::Step(int32_t token, int64_t position) {
  const int64_t C = config_.embed, H = config_.heads, D = config_.head_dim();
  const int64_t F = config_.ff_hidden(), T = config_.context;
  std::vector<float> x(embed_ + token * C, embed_ + (token + 1) * C);
  if (positions_) {
    for (int64_t i = 0; i < C; ++i) x[i] += positions_[position * C + i];
  }
  std::vector<float> h(C), qkv(3 * C), att(C), tmp(C), up(F), gate(F), scores(T);
  const int64_t row = (head_ + length_) % T;  // ring slot of this token
  const int64_t L = config_.layers, K = config_.key_layers();
  for (int64_t step = 0; step < L * config_.architecture.passes; ++step) {
    const Layer& l = layers_[step % L];
    Norm(x.data(), l.ln1_gain, l.ln1_bias, h.data());
    if (latent_) {
      latent_->Attend(step % L, h.data(), position, row, head_, length_ + 1, att.data());
    } else {
      // This layer's stage, or the last owner's of this pass (own_keys).
      CacheStage& cache = stages_[(step / L) * K + std::min(step % L, K - 1)];
      host::MatVec(l.qkv_w, h.data(), l.owns_keys ? 3 * C : C, C, qkv.data(), l.qkv_b);
      if (config_.architecture.positions == PositionKind::kRope) {
        host::RotateHeads(qkv.data(), (l.owns_keys ? 2 * C : C) / D, D, position);
      }
      if (l.owns_keys) {
        std::copy(qkv.begin() + C, qkv.begin() + 2 * C, cache.keys.begin() + row * C);
        std::copy(qkv.begin() + 2 * C, qkv.end(), cache.values.begin() + row * C);
      }
      const int64_t n = length_ + 1;
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      for (int64_t hd = 0; hd < H; ++hd) {
        const float* q = qkv.data() + hd * D;
        float max_score = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          const float* k = cache.keys.data() + ((head_ + j) % T) * C + hd * D;
          float s = 0;
          for (int64_t d = 0; d < D; ++d) s += q[d] * k[d];
          scores[j] = s * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < n; ++j) total += (scores[j] = std::exp(scores[j] - max_score));
        float* o = att.data() + hd * D;
        std::fill(o, o + D, 0.0f);
        for (int64_t j = 0; j < n; ++j) {
          const float p = static_cast<float>(scores[j] / total);
          const float* v = cache.values.data() + ((head_ + j) % T) * C + hd * D;
          for (int64_t d = 0; d < D; ++d) o[d] += p * v[d];
        }
      }
    }
    host::MatVec(l.proj_w, att.data(), C, C, tmp.data(), l.proj_b);
    for (int64_t i = 0; i < C; ++i) x[i] += tmp[i];
    Norm(x.data(), l.ln2_gain, l.ln2_bias, h.data());
    if (l.moe.router != nullptr) {  // engine/model/moe.h
      MoeFeedForwardHost(config_, l.moe, h.data(), tmp.data());
      for (int64_t i = 0; i < C; ++i) x[i] += tmp[i];
      continue;
    }
    host::MatVec(l.up_w, h.data(), F, C, up.data(), l.up_b);
    if (l.gate_w) {
      host::MatVec(l.gate_w, h.data(), F, C, gate.data(), l.gate_b);
      host::SwiGluInPlace(up.data(), gate.data(), F);
    } else {
      for (int64_t i = 0; i < F; ++i) up[i] = host::GeluTanh(up[i]);
    }
    host::MatVec(l.ff_proj_w, up.data(), C, F, tmp.data(), l.ff_proj_b);
    for (int64_t i = 0; i < C; ++i) x[i] += tmp[i];
  }
  ++length_;
  window_.push_back(token);
  Norm(x.data(), final_gain_, final_bias_, h.data());
  host::MatVec(embed_, h.data(), config_.vocab, C, logits_.data());
}

int32_t Generator::Sample(const SampleOptions& options, Rng& rng) const {
  const int64_t V = config_.vocab;
  if (options.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
  }
  std::vector<int32_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, V) : V;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits_[a] > logits_[b]; });
  std::vector<double> p(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    total += p[i] = std::exp((logits_[ids[i]] - logits_[ids[0]]) / options.temperature);
  }
  double u = rng.Uniform() * total;
  for (int64_t i = 0; i < k; ++i) {
    if ((u -= p[i]) <= 0) return ids[i];
  }
  return ids[k - 1];
}

std::vector<int32_t> Generator::Generate(const std::vector<int32_t>& prompt, int64_t count,
                                         const SampleOptions& options,
                                         const std::function<void(int32_t)>& on_token) {
  CHECK(!prompt.empty()) << "generation needs at least one prompt token";
  Rng rng(options.seed);
  for (int32_t t : prompt) Feed(t);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t next = Sample(options, rng);
    out.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 < count) Feed(next);
  }
  return out;
}

}  // namespace smallem
