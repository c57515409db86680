// Generator: autoregressive sampling from a trained Model with a KV cache.
//
// Inference runs on the host in f32 from a copy of the weights (one token at
// a time is matrix–vector work; the training backends are built for
// batches). Each layer caches the keys and values of the last `context`
// positions. With RoPE the cache slides: once the text passes the context,
// the oldest row is dropped and positions keep counting, since rotary scores
// depend only on the distance between positions. With learned positions the
// table ends at the context, so the window is re-encoded from its last
// context − 1 tokens instead.
//
// The cache has one stage per layer that owns its keys (own_keys) per pass
// (passes): a borrowing layer reads the stage of the last owner of its pass,
// and each pass keeps its own states, since its inputs differ. With latent
// attention each layer's stage holds its latent and rotary key instead
// (engine/model/latent_cache.h).
#ifndef SMALLEM_ENGINE_MODEL_GENERATOR_H_
#define SMALLEM_ENGINE_MODEL_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/model/latent_cache.h"
#include "engine/model/model.h"
#include "engine/random.h"

namespace smallem {

struct SampleOptions {
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 40;        // 0 = whole vocabulary
  uint64_t seed = 1;
};

class Generator {
 public:
  // What the cache holds for a config: `stages` (layers that own keys ×
  // passes) of `vectors_per_stage` rows (keys, values) of `width` elements
  // of `element_bytes` each, per cached position.
  struct CacheLayout {
    int64_t stages = 0;
    int64_t vectors_per_stage = 2;
    int64_t width = 0;
    int64_t element_bytes = sizeof(float);
    int64_t BytesPerToken() const { return stages * vectors_per_stage * width * element_bytes; }
  };
  static CacheLayout LayoutFor(const ModelConfig& config);

  explicit Generator(const Model& model);

  // Feeds one token at the next position; returns the logits (V) that
  // predict the token after it.
  const std::vector<float>& Feed(int32_t token);
  // Feeds the prompt, then samples `count` tokens, calling on_token with each.
  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt, int64_t count,
                                const SampleOptions& options,
                                const std::function<void(int32_t)>& on_token = {});
  void Reset();

  int64_t cached_positions() const { return length_; }
  // Bytes the cache holds per cached token, from its actual layout: every
  // stage's keys and values, in the dtype they are stored in.
  int64_t CacheBytesPerToken() const;

 private:
  struct Layer {
    const float *ln1_gain, *ln1_bias, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_gain, *ln2_bias, *up_w, *up_b, *gate_w, *gate_b, *ff_proj_w, *ff_proj_b;
    bool owns_keys;  // false: qkv_w, qkv_b are the query's alone (own_keys)
    MoeHostWeights moe;  // router null: the dense feed-forward above
  };
  struct CacheStage {
    std::vector<float> keys, values;  // (context, C) ring buffers
  };

  void Norm(const float* x, const float* gain, const float* bias, float* out) const;
  void Step(int32_t token, int64_t position);
  int32_t Sample(const SampleOptions& options, Rng& rng) const;

  ModelConfig config_;
  std::vector<float> weights_;  // host copy of every parameter
  const float *embed_ = nullptr, *positions_ = nullptr, *final_gain_ = nullptr,
              *final_bias_ = nullptr;
  std::vector<Layer> layers_;
  // Stage of (pass p, owning layer i): p · key_layers + i.
  std::vector<CacheStage> stages_;
  std::vector<int32_t> window_;  // tokens currently cached, oldest first
  int64_t length_ = 0;           // rows in the cache
  int64_t next_position_ = 0;    // absolute position of the next token
  int64_t head_ = 0;             // ring-buffer row of the oldest entry
  std::vector<float> logits_;
  // attention: latent — its cache replaces the layers' keys and values.
  std::unique_ptr<LatentCache> latent_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_GENERATOR_H_
