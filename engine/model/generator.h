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
#ifndef SMALLEM_ENGINE_MODEL_GENERATOR_H_
#define SMALLEM_ENGINE_MODEL_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <vector>

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

 private:
  struct Layer {
    const float *ln1_gain, *ln1_bias, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_gain, *ln2_bias, *up_w, *up_b, *gate_w, *gate_b, *ff_proj_w, *ff_proj_b;
    std::vector<float> keys, values;  // (context, C) ring buffers
    MoeHostWeights moe;  // router null: the dense feed-forward above
  };

  void Norm(const float* x, const float* gain, const float* bias, float* out) const;
  void Step(int32_t token, int64_t position);
  int32_t Sample(const SampleOptions& options, Rng& rng) const;

  ModelConfig config_;
  std::vector<float> weights_;  // host copy of every parameter
  const float *embed_ = nullptr, *positions_ = nullptr, *final_gain_ = nullptr,
              *final_bias_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<int32_t> window_;  // tokens currently cached, oldest first
  int64_t length_ = 0;           // rows in the cache
  int64_t next_position_ = 0;    // absolute position of the next token
  int64_t head_ = 0;             // ring-buffer row of the oldest entry
  std::vector<float> logits_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_GENERATOR_H_
