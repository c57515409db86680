// LatentCache: latent attention's generation cache (engine/model/generator.h)
// and its one-token attention, on the host in f32.
//
// Per layer and cached position it keeps the normed latent c_kv (L floats)
// and the rotated shared key k_rope (R floats) — not the per-head keys and
// values (engine/model/latent_attention.h). The up-projections are absorbed
// rather than applied to the cache: with W_k,h and W_v,h head h's key-content
// and value rows of kv_up,
//   score_j = q_content,h · (W_k,h c_j) + q_rotary,h · k_rope_j
//           = (W_k,hᵀ q_content,h) · c_j + q_rotary,h · k_rope_j
//   out_h   = Σ_j p_j W_v,h c_j = W_v,h (Σ_j p_j c_j)
// so a step costs O(H·(D·L + n·(L + R))) per layer for n cached positions,
// instead of rebuilding n·H keys and values. Positions are absolute (RoPE):
// the ring of rows slides past the context as the Generator's does.
// Used by one thread at a time.
#ifndef SMALLEM_ENGINE_MODEL_LATENT_CACHE_H_
#define SMALLEM_ENGINE_MODEL_LATENT_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runspec/model_config.h"
#include "runspec/parameter_layout.h"

namespace smallem {

class LatentCache {
 public:
  // `at` returns the host copy of the parameter of a slot of `layout`
  // (nullptr for kNoSlot); the pointers must outlive the cache. config has
  // attention: latent.
  LatentCache(const ModelConfig& config, const ParameterLayout& layout,
              const std::function<const float*(int)>& at);

  // Layer `layer`'s attention output att (C), before the output projection,
  // for the token whose normed stream is h (C) at absolute `position`. Stores
  // its latent and rotary key at ring row `row`, then attends over the
  // `count` rows from ring row `first` (mod context), that one included.
  void Attend(int64_t layer, const float* h, int64_t position, int64_t row, int64_t first,
              int64_t count, float* att);

  // What one cached position costs, all layers: LatentCacheBytesPerToken.
  int64_t bytes_per_token() const;

 private:
  struct Layer {
    const float *query, *query_down, *query_norm;  // query_down null without q_latent
    const float *kv_down, *kv_norm, *kv_up, *key_rope;
    std::vector<float> latents;    // (context, L) ring
    std::vector<float> rope_keys;  // (context, R) ring
  };

  ModelConfig config_;
  int64_t heads_, head_dim_, rope_, content_, latent_, q_latent_;  // H, D, R, Dn, L, Q
  std::vector<Layer> layers_;
  // Scratch of one step.
  std::vector<float> q_in_, q_, absorbed_, mixed_, scores_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_LATENT_CACHE_H_
