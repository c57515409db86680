#include "engine/model/latent_cache.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "engine/model/host_math.h"
#include "engine/model/latent_attention.h"

namespace smallem {
namespace {

// x (n) ← x · rstd · gain, as the RmsNorm op (eps 1e-5).
void RmsNormInPlace(float* x, const float* gain, int64_t n) {
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += double{x[i]} * x[i];
  const float rstd = static_cast<float>(1.0 / std::sqrt(sq / n + 1e-5));
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * rstd * gain[i];
}

}  // namespace

LatentCache::LatentCache(const ModelConfig& config, const ParameterLayout& layout,
                         const std::function<const float*(int)>& at)
    : config_(config),
      heads_(config.heads),
      head_dim_(config.head_dim()),
      rope_(config.latent_rope_dim()),
      content_(config.head_dim() - config.latent_rope_dim()),
      latent_(config.architecture.kv_latent),
      q_latent_(config.architecture.q_latent) {
  CHECK(config.architecture.attention == AttentionKind::kLatent) << "LatentCache needs latent";
  for (int64_t i = 0; i < config.layers; ++i) {
    const LatentAttentionSlots& a = layout.blocks()[i].latent;
    Layer l{.query = at(a.query),
            .query_down = at(a.query_down),
            .query_norm = at(a.query_norm),
            .kv_down = at(a.kv_down),
            .kv_norm = at(a.kv_norm),
            .kv_up = at(a.kv_up),
            .key_rope = at(a.key_rope),
            .latents = std::vector<float>(config.context * latent_),
            .rope_keys = std::vector<float>(config.context * rope_)};
    CHECK(l.query && l.kv_down && l.kv_norm && l.kv_up && l.key_rope)
        << "latent attention weights of block " << i << " missing";
    layers_.push_back(std::move(l));
  }
  q_in_.resize(std::max(q_latent_, config.embed));
  q_.resize(heads_ * head_dim_);
  absorbed_.resize(latent_);
  mixed_.resize(latent_);
  scores_.resize(config.context);
}

int64_t LatentCache::bytes_per_token() const { return LatentCacheBytesPerToken(config_); }

void LatentCache::Attend(int64_t layer, const float* h, int64_t position, int64_t row,
                         int64_t first, int64_t count, float* att) {
  Layer& l = layers_[layer];
  const int64_t C = config_.embed, T = config_.context, H = heads_, D = head_dim_;
  const int64_t R = rope_, Dn = content_, L = latent_;
  // This token's latent and rotary key into the cache.
  float* latent = l.latents.data() + row * L;
  host::MatVec(l.kv_down, h, L, C, latent);
  RmsNormInPlace(latent, l.kv_norm, L);
  float* rope_key = l.rope_keys.data() + row * R;
  host::MatVec(l.key_rope, h, R, C, rope_key);
  host::RotateHeads(rope_key, 1, R, position);
  // Its query: [rotary part of each head | content part of each head].
  const float* q_in = h;
  int64_t q_cols = C;
  if (l.query_down != nullptr) {
    host::MatVec(l.query_down, h, q_latent_, C, q_in_.data());
    RmsNormInPlace(q_in_.data(), l.query_norm, q_latent_);
    q_in = q_in_.data();
    q_cols = q_latent_;
  }
  host::MatVec(l.query, q_in, H * D, q_cols, q_.data());
  host::RotateHeads(q_.data(), H, R, position);

  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t hd = 0; hd < H; ++hd) {
    const float* q_rotary = q_.data() + hd * R;
    const float* q_content = q_.data() + H * R + hd * Dn;
    // absorbed = W_k,hᵀ q_content: the query in latent space.
    const float* key_up = l.kv_up + hd * Dn * L;  // (Dn, L)
    std::fill(absorbed_.begin(), absorbed_.end(), 0.0f);
    for (int64_t d = 0; d < Dn; ++d) {
      const float qd = q_content[d];
      const float* w = key_up + d * L;
      for (int64_t k = 0; k < L; ++k) absorbed_[k] += qd * w[k];
    }
    float max_score = -INFINITY;
    for (int64_t j = 0; j < count; ++j) {
      const int64_t r = (first + j) % T;
      const float* c = l.latents.data() + r * L;
      const float* kr = l.rope_keys.data() + r * R;
      float s = 0;
      for (int64_t k = 0; k < L; ++k) s += absorbed_[k] * c[k];
      for (int64_t d = 0; d < R; ++d) s += q_rotary[d] * kr[d];
      scores_[j] = s * scale;
      max_score = std::max(max_score, scores_[j]);
    }
    double total = 0;
    for (int64_t j = 0; j < count; ++j) total += (scores_[j] = std::exp(scores_[j] - max_score));
    // mixed = Σ_j p_j c_j, then out_h = W_v,h · mixed.
    std::fill(mixed_.begin(), mixed_.end(), 0.0f);
    for (int64_t j = 0; j < count; ++j) {
      const float p = static_cast<float>(scores_[j] / total);
      const float* c = l.latents.data() + ((first + j) % T) * L;
      for (int64_t k = 0; k < L; ++k) mixed_[k] += p * c[k];
    }
    const float* value_up = l.kv_up + (H * Dn + hd * D) * L;  // (D, L)
    host::MatVec(value_up, mixed_.data(), D, L, att + hd * D);
  }
}

}  // namespace smallem
