// ModelConfig: what a weights file needs to rebuild its model, serialized in
// the safetensors `__metadata__` (docs/architecture.md § The formats):
//   {"vocab":8192,"context":512,"layers":8,"heads":8,"embed":512,
//    "architecture":{"norm":"rms","feed_forward":"swiglu","positions":"rope"}}
// plus "mtp" and "mtp_weight" when the model has multi-token prediction.
#ifndef SMALLEM_RUNSPEC_MODEL_CONFIG_H_
#define SMALLEM_RUNSPEC_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runspec/moe_config.h"

namespace smallem {

enum class NormKind { kLayer, kRms };
enum class FeedForwardKind { kGelu, kSwiGlu };
enum class PositionKind { kLearned, kRope };
// mha: every head projects its own keys and values from the stream.
// latent: multi-head latent attention (DeepSeek-V2; engine/model/latent_attention.h).
enum class AttentionKind { kMha, kLatent };

struct Architecture {
  NormKind norm = NormKind::kLayer;
  FeedForwardKind feed_forward = FeedForwardKind::kGelu;
  PositionKind positions = PositionKind::kLearned;
  bool bias = true;  // biases on linear layers (gpt2: true, modern: false)
  AttentionKind attention = AttentionKind::kMha;
  // Latent attention only (0 with mha): the width of the compressed latent
  // every head's keys and values are rebuilt from (required > 0); the
  // per-head width of the decoupled RoPE part of queries and keys (0 = half
  // the head size; even, below the head size); the width of the queries'
  // own latent (0 = queries projected directly from the stream).
  int64_t kv_latent = 0;
  int64_t rope_dim = 0;
  int64_t q_latent = 0;
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
absl::StatusOr<AttentionKind> ParseAttention(const std::string& s);
const char* AttentionName(AttentionKind k);

struct ModelConfig {
  int64_t vocab = 256;
  int64_t context = 128;  // T: longest sequence (learned table rows, rope span)
  int64_t layers = 4;     // L
  int64_t heads = 4;      // H
  int64_t embed = 128;    // C
  Architecture architecture;
  // Multi-token prediction (engine/model/mtp.h): D extra depths, depth d
  // predicting token t+1+d; 0 = none. Written to the JSON only when > 0, so
  // files without it load as D = 0.
  int64_t mtp = 0;
  double mtp_weight = 0.3;  // training loss += mtp_weight × mean over depths
  MoeConfig moe;  // experts = 0: dense feed-forward everywhere (runspec/moe_config.h)

  int64_t head_dim() const { return embed / heads; }  // D
  // Layers that compute their own keys and values (own_keys, 0 = layers).
  int64_t key_layers() const;
  bool owns_keys(int64_t layer) const { return layer < key_layers(); }
  // Blocks a token goes through: layers × passes (the residual init's depth).
  int64_t effective_depth() const { return layers * architecture.passes; }
  // F: 4C for gelu, 8C/3 rounded up to a multiple of 8 for swiglu.
  int64_t ff_hidden() const;
  // R: latent attention's decoupled RoPE width, rope_dim or D/2 when 0.
  int64_t latent_rope_dim() const;
  // The sums of ParameterLayout(*this) (runspec/parameter_layout.h), which
  // lists every parameter; REQUIRES: Validate() is OK.
  // Total number of parameters (tied head counted once), the MTP modules'
  // included: the size of the parameter buffer, which includes the MoE
  // routers' selection biases.
  int64_t ParameterCount() const;
  // The MTP modules' share of ParameterCount (0 without MTP): parameters
  // trained but never used to generate.
  int64_t MtpParameterCount() const;
  // The trained parameters: ParameterCount() less the selection biases
  // (non-trained buffers, E per MoE layer).
  int64_t TotalParameterCount() const;
  // The trained parameters one token uses: the routed experts count top_k
  // of E. Equals TotalParameterCount() for a dense model.
  int64_t ActiveParameterCount() const;

  // Checks every constraint (embed divisible by heads, even head size for
  // rope, positive sizes, 0 ≤ mtp < context, mtp_weight ≥ 0) with a message
  // naming the offending value.
  absl::Status Validate() const;
  // The attention fields alone (part of Validate): latent needs rope
  // positions, kv_latent > 0, an even rope_dim below the head size; mha
  // needs the latent fields 0.
  absl::Status ValidateLatentAttention() const;

  nlohmann::json ToJson() const;
  static absl::StatusOr<ModelConfig> FromJson(const nlohmann::json& j);
};

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_MODEL_CONFIG_H_
