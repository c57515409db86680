// ModelConfig: what a weights file needs to rebuild its model, serialized in
// the safetensors `__metadata__` (docs/architecture.md § The formats):
//   {"vocab":8192,"context":512,"layers":8,"heads":8,"embed":512,
//    "architecture":{"norm":"rms","feed_forward":"swiglu","positions":"rope"}}
#ifndef SMALLEM_SPEC_MODEL_CONFIG_H_
#define SMALLEM_SPEC_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

enum class NormKind { kLayer, kRms };
enum class FeedForwardKind { kGelu, kSwiGlu };
enum class PositionKind { kLearned, kRope };

struct Architecture {
  NormKind norm = NormKind::kLayer;
  FeedForwardKind feed_forward = FeedForwardKind::kGelu;
  PositionKind positions = PositionKind::kLearned;
  bool bias = true;  // biases on linear layers (gpt2: true, modern: false)
  // Layers 0…own_keys−1 compute keys and values; every later layer borrows
  // those of layer own_keys−1 (same pass) and has no key/value weights.
  // 0 = every layer owns its keys.
  int64_t own_keys = 0;
  // The layer stack traversed `passes` times with shared weights.
  int64_t passes = 1;

  static Architecture Gpt2();    // layer, gelu, learned, bias
  static Architecture Modern();  // rms, swiglu, rope, no bias
  // "gpt2" or "modern"; anything else names the choices.
  static absl::StatusOr<Architecture> FromPreset(const std::string& name);

  bool operator==(const Architecture&) const = default;
};

// Option parsers shared by the CLI and grid files; errors list the choices.
absl::StatusOr<NormKind> ParseNorm(const std::string& s);
absl::StatusOr<FeedForwardKind> ParseFeedForward(const std::string& s);
absl::StatusOr<PositionKind> ParsePositions(const std::string& s);
const char* NormName(NormKind k);
const char* FeedForwardName(FeedForwardKind k);
const char* PositionsName(PositionKind k);

struct ModelConfig {
  int64_t vocab = 256;
  int64_t context = 128;  // T: longest sequence (learned table rows, rope span)
  int64_t layers = 4;     // L
  int64_t heads = 4;      // H
  int64_t embed = 128;    // C
  Architecture architecture;

  int64_t head_dim() const { return embed / heads; }  // D
  // Layers that compute their own keys and values (own_keys, 0 = layers).
  int64_t key_layers() const;
  bool owns_keys(int64_t layer) const { return layer < key_layers(); }
  // Blocks a token goes through: layers × passes (the residual init's depth).
  int64_t effective_depth() const { return layers * architecture.passes; }
  // F: 4C for gelu, 8C/3 rounded up to a multiple of 8 for swiglu.
  int64_t ff_hidden() const;
  // Total number of parameters (tied head counted once).
  int64_t ParameterCount() const;

  // Checks every constraint (embed divisible by heads, even head size for
  // rope, positive sizes) with a message naming the offending value.
  absl::Status Validate() const;

  nlohmann::json ToJson() const;
  static absl::StatusOr<ModelConfig> FromJson(const nlohmann::json& j);
};

}  // namespace smallem

#endif  // SMALLEM_SPEC_MODEL_CONFIG_H_
