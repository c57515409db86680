// MoeConfig: the mixture-of-experts feed-forward of a model
// (docs/model.md § Mixture of experts). With experts = 0 (the
// default) every block has the dense feed-forward and nothing here applies.
//
// A MoE layer replaces a block's feed-forward by E routed experts, each a
// feed-forward of the architecture's kind (GELU or SwiGLU) and width
// `Width()`, of which each token uses top_k, plus `shared` experts every
// token uses. The default width is the dense width F ÷ (top_k + shared), so
// the parameters a token activates match the dense model's (the router's
// E·C per layer aside). Routing: router logits W_r·x; the top_k experts by
// logit + bias (the bias only selects, DeepSeek-V3's auxiliary-loss-free
// balancing); gates are the softmax over the chosen k logits (without the
// bias). Ties go to the lower expert index.
//
// Serialized in the weights file and the result JSON as
//   "moe":{"experts":8,"top_k":2,"shared":0,"expert_width":256,"every":1,
//          "first_dense":false,"balance":"bias","bias_rate":0.01,
//          "aux_coefficient":0.01}
// next to "architecture"; absent = dense, so older files load unchanged.
#ifndef SMALLEM_RUNSPEC_MOE_CONFIG_H_
#define SMALLEM_RUNSPEC_MOE_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

// How the router's load is kept even.
enum class BalanceKind {
  kBias,  // a per-expert selection bias, nudged after each step (no gradient)
  kAux,   // an auxiliary loss α·E·Σ_e f_e·P_e (Switch Transformer), gradient only
};
absl::StatusOr<BalanceKind> ParseBalance(const std::string& s);
const char* BalanceName(BalanceKind k);

struct MoeConfig {
  // The experts `feed_forward: moe` means when `experts` is not given.
  static constexpr int64_t kDefaultExperts = 8;
  // The most routed experts a model may have (Validate; the coordinator
  // bounds a progress point's tokens_per_expert by it).
  static constexpr int64_t kMaxExperts = 1024;

  int64_t experts = 0;       // E routed experts; 0 = dense
  int64_t top_k = 2;         // k experts per token
  int64_t shared = 0;        // shared experts, used by every token
  int64_t expert_width = 0;  // each expert's hidden width; 0 = F ÷ (top_k + shared)
  int64_t every = 1;         // MoE in layers i with i mod every = 0
  bool first_dense = false;  // layer 0 keeps the dense feed-forward
  BalanceKind balance = BalanceKind::kBias;
  // bias balancing: step of each bias update. 0.01, not DeepSeek-V3's
  // 0.001: runs here last hundreds of steps, not hundreds of thousands
  // (docs/model.md § Mixture of experts, "Balancing").
  double bias_rate = 1e-2;
  double aux_coefficient = 1e-2;  // aux balancing: α

  bool enabled() const { return experts > 0; }
  // Whether layer `layer` (0-based) has experts.
  bool IsMoeLayer(int64_t layer) const;
  // The experts' hidden width given the dense width F.
  int64_t Width(int64_t dense_width) const;

  // Each constraint, with a message naming the key (top_k ≤ experts, …).
  absl::Status Validate() const;

  bool operator==(const MoeConfig&) const = default;

  nlohmann::json ToJson() const;
  // Every key optional (defaults above); unknown keys and wrong types name
  // the key.
  static absl::StatusOr<MoeConfig> FromJson(const nlohmann::json& j);
};

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_MOE_CONFIG_H_
