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
#include "spec/moe_config.h"

namespace smallem {

enum class NormKind { kLayer, kRms };
enum class FeedForwardKind { kGelu, kSwiGlu };
enum class PositionKind { kLearned, kRope };

struct Architecture {
  NormKind norm = NormKind::kLayer;
  FeedForwardKind feed_forward = FeedForwardKind::kGelu;
  PositionKind positions = PositionKind::kLearned;
  bool bias = true;  // biases on linear layers (gpt2: true, modern: false)

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
  MoeConfig moe;  // experts = 0: dense feed-forward everywhere (spec/moe_config.h)

  int64_t head_dim() const { return embed / heads; }  // D
  // F: 4C for gelu, 8C/3 rounded up to a multiple of 8 for swiglu.
  int64_t ff_hidden() const;
  // Total number of parameters (tied head counted once): the size of the
  // parameter buffer, which includes the MoE routers' selection biases.
  int64_t ParameterCount() const;
  // The trained parameters: ParameterCount() less the selection biases
  // (non-trained buffers, E per MoE layer).
  int64_t TotalParameterCount() const;
  // The trained parameters one token uses: the routed experts count top_k
  // of E. Equals TotalParameterCount() for a dense model.
  int64_t ActiveParameterCount() const;

  // Checks every constraint (embed divisible by heads, even head size for
  // rope, positive sizes) with a message naming the offending value.
  absl::Status Validate() const;

  nlohmann::json ToJson() const;
  static absl::StatusOr<ModelConfig> FromJson(const nlohmann::json& j);
};

}  // namespace smallem

#endif  // SMALLEM_SPEC_MODEL_CONFIG_H_
