#include "runspec/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "runspec/parameter_layout.h"

namespace smallem {

Architecture Architecture::Gpt2() { return Architecture{}; }

Architecture Architecture::Modern() {
  return Architecture{.norm = NormKind::kRms,
                      .feed_forward = FeedForwardKind::kSwiGlu,
                      .positions = PositionKind::kRope,
                      .bias = false};
}

absl::StatusOr<Architecture> Architecture::FromPreset(const std::string& name) {
  if (name == "gpt2") return Gpt2();
  if (name == "modern") return Modern();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown architecture \"", name, "\" (expected gpt2 or modern)"));
}

absl::StatusOr<NormKind> ParseNorm(const std::string& s) {
  if (s == "layer") return NormKind::kLayer;
  if (s == "rms") return NormKind::kRms;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown norm \"", s, "\" (expected layer or rms)"));
}

absl::StatusOr<FeedForwardKind> ParseFeedForward(const std::string& s) {
  if (s == "gelu") return FeedForwardKind::kGelu;
  if (s == "swiglu") return FeedForwardKind::kSwiGlu;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown feed_forward \"", s,
                   "\" (expected gelu or swiglu; moe in a run spec or grid: a mixture of "
                   "experts of the preset's activation)"));
}

absl::StatusOr<PositionKind> ParsePositions(const std::string& s) {
  if (s == "learned") return PositionKind::kLearned;
  if (s == "rope") return PositionKind::kRope;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown positions \"", s, "\" (expected learned or rope)"));
}

absl::StatusOr<AttentionKind> ParseAttention(const std::string& s) {
  if (s == "mha") return AttentionKind::kMha;
  if (s == "latent") return AttentionKind::kLatent;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown attention \"", s, "\" (expected mha or latent)"));
}

const char* AttentionName(AttentionKind k) {
  return k == AttentionKind::kMha ? "mha" : "latent";
}

const char* NormName(NormKind k) { return k == NormKind::kLayer ? "layer" : "rms"; }
const char* FeedForwardName(FeedForwardKind k) {
  return k == FeedForwardKind::kGelu ? "gelu" : "swiglu";
}
const char* PositionsName(PositionKind k) {
  return k == PositionKind::kLearned ? "learned" : "rope";
}

int64_t ModelConfig::ff_hidden() const {
  if (architecture.feed_forward == FeedForwardKind::kGelu) return 4 * embed;
  // 8C/3 keeps the parameter count of the 4C GELU block; rounded up to 8.
  const int64_t f = (8 * embed + 2) / 3;
  return (f + 7) / 8 * 8;
}

int64_t ModelConfig::latent_rope_dim() const {
  return architecture.rope_dim > 0 ? architecture.rope_dim : head_dim() / 2;
}

int64_t ModelConfig::key_layers() const {
  return architecture.own_keys > 0 && architecture.own_keys < layers ? architecture.own_keys
                                                                       : layers;
}

int64_t ModelConfig::ParameterCount() const { return ParameterLayout(*this).ParameterCount(); }

int64_t ModelConfig::MtpParameterCount() const {
  return ParameterLayout(*this).MtpParameterCount();
}

int64_t ModelConfig::TotalParameterCount() const {
  return ParameterLayout(*this).TotalParameterCount();
}

int64_t ModelConfig::ActiveParameterCount() const {
  return ParameterLayout(*this).ActiveParameterCount();
}

absl::Status ModelConfig::Validate() const {
  auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(name, " must be positive (got ", v, ")"));
  };
  for (auto [name, v] : {std::pair{"vocab", vocab}, {"context", context},
                         {"layers", layers}, {"heads", heads}, {"embed", embed}}) {
    RETURN_IF_ERROR(positive(name, v));
  }
  if (embed % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embed ", embed, " is not divisible by heads ", heads,
        " (each head gets embed/heads channels)"));
  }
  if (architecture.positions == PositionKind::kRope && head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rope needs an even head size; embed/heads = ", head_dim()));
  }
  RETURN_IF_ERROR(ValidateLatentAttention());
  if (architecture.own_keys < 0 || architecture.own_keys > layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "own_keys ", architecture.own_keys, " must be between 0 (every layer owns its keys) "
        "and layers ", layers));
  }
  if (architecture.passes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "passes must be at least 1 (got ", architecture.passes,
        "; 1 = the layer stack traversed once)"));
  }
  if (architecture.attention == AttentionKind::kLatent && architecture.passes != 1) {
    return absl::InvalidArgumentError(
        "passes cannot be combined with attention: latent yet (the latent generation cache "
        "has one stage per layer, not per pass)");
  }
  if (architecture.attention == AttentionKind::kLatent && architecture.own_keys != 0) {
    // A borrowing layer would need the owner's latent and its up-projections:
    // not built (docs/model.md § Sharing keys and looping layers).
    return absl::InvalidArgumentError(
        "own_keys cannot be combined with attention: latent (the latent cache is already "
        "per layer and small; share keys with attention: mha)");
  }
  if (vocab > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab ", vocab, " exceeds 65536 (tokens are stored as uint16)"));
  }
  if (mtp < 0 || mtp >= context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mtp ", mtp, " must be 0 (off) or a number of extra prediction depths below context ",
        context, " (depth d is trained on the first context − d positions)"));
  }
  if (!(mtp_weight >= 0) || !std::isfinite(mtp_weight)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mtp_weight ", mtp_weight, " must be a finite number ≥ 0 (the weight of the extra "
        "depths' mean loss)"));
  }
  return moe.Validate();
}

absl::Status ModelConfig::ValidateLatentAttention() const {
  const Architecture& a = architecture;
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (a.attention == AttentionKind::kMha) {
    for (auto [name, v] : {std::pair{"kv_latent", a.kv_latent}, {"rope_dim", a.rope_dim},
                           {"q_latent", a.q_latent}}) {
      if (v != 0) {
        return bad(name, " ", v, " applies only with attention: latent (attention is mha)");
      }
    }
    return absl::OkStatus();
  }
  if (a.positions != PositionKind::kRope) {
    return bad("attention: latent needs positions: rope (its keys carry positions in a "
               "decoupled RoPE part; learned positions are refused)");
  }
  if (a.kv_latent <= 0) {
    return bad("kv_latent must be positive with attention: latent (got ", a.kv_latent,
               "): the width of the latent keys and values are rebuilt from; leave it out for "
               "embed/4");
  }
  if (a.q_latent < 0) return bad("q_latent must be 0 (off) or positive (got ", a.q_latent, ")");
  if (a.rope_dim < 0) {
    return bad("rope_dim must be positive, or 0 for half the head size (got ", a.rope_dim, ")");
  }
  const int64_t r = latent_rope_dim();
  if (r % 2 != 0 || r == 0) {
    return bad("rope_dim ", r, a.rope_dim == 0 ? " (half the head size embed/heads)" : "",
               " must be even and positive: RoPE rotates pairs of channels");
  }
  if (r >= head_dim()) {
    return bad("rope_dim ", r, " must be below the head size embed/heads = ", head_dim(),
               " (the rest of each head is its content part)");
  }
  return absl::OkStatus();
}

nlohmann::json ModelConfig::ToJson() const {
  nlohmann::json arch = {{"norm", NormName(architecture.norm)},
                         {"feed_forward", FeedForwardName(architecture.feed_forward)},
                         {"positions", PositionsName(architecture.positions)},
                         {"bias", architecture.bias}};
  if (architecture.attention == AttentionKind::kLatent) {
    // Only when latent, so multi-head files keep their config text.
    arch["attention"] = AttentionName(architecture.attention);
    arch["kv_latent"] = architecture.kv_latent;
    arch["rope_dim"] = architecture.rope_dim;
    arch["q_latent"] = architecture.q_latent;
  }
  // Written only when set, so files of models without them stay as they were.
  if (architecture.own_keys != 0) arch["own_keys"] = architecture.own_keys;
  if (architecture.passes != 1) arch["passes"] = architecture.passes;
  nlohmann::json j = {{"vocab", vocab},   {"context", context}, {"layers", layers},
                      {"heads", heads},   {"embed", embed},     {"architecture", arch}};
  if (mtp > 0) {
    j["mtp"] = mtp;
    j["mtp_weight"] = mtp_weight;
  }
  if (moe.enabled()) j["moe"] = moe.ToJson();  // absent = dense: older readers see no change
  return j;
}

absl::StatusOr<ModelConfig> ModelConfig::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("model config is not a JSON object");
  ModelConfig c;
  for (auto [key, field] : {std::pair{"vocab", &c.vocab}, {"context", &c.context},
                            {"layers", &c.layers}, {"heads", &c.heads},
                            {"embed", &c.embed}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: \"", key, "\" missing or not an integer"));
    }
    *field = it->get<int64_t>();
  }
  // A file without "architecture" is a GPT-2 file (the series' article 9).
  c.architecture = Architecture::Gpt2();
  if (auto it = j.find("architecture"); it != j.end()) {
    if (!it->is_object()) return absl::InvalidArgumentError("model config: bad architecture");
    const nlohmann::json& a = *it;
    if (a.contains("norm")) {
      ASSIGN_OR_RETURN(c.architecture.norm,
                       ParseNorm(a["norm"].is_string() ? a["norm"].get<std::string>() : ""));
    }
    if (a.contains("feed_forward")) {
      ASSIGN_OR_RETURN(c.architecture.feed_forward,
                       ParseFeedForward(a["feed_forward"].is_string()
                                            ? a["feed_forward"].get<std::string>()
                                            : ""));
    }
    if (a.contains("positions")) {
      ASSIGN_OR_RETURN(
          c.architecture.positions,
          ParsePositions(a["positions"].is_string() ? a["positions"].get<std::string>() : ""));
    }
    if (a.contains("bias")) {
      if (!a["bias"].is_boolean()) return absl::InvalidArgumentError("model config: bias must be true or false");
      c.architecture.bias = a["bias"].get<bool>();
    }
    // Absent (files written before latent attention): mha.
    if (a.contains("attention")) {
      ASSIGN_OR_RETURN(c.architecture.attention,
                       ParseAttention(a["attention"].is_string()
                                          ? a["attention"].get<std::string>()
                                          : ""));
    }
    for (auto [key, field] : {std::pair{"kv_latent", &c.architecture.kv_latent},
                              {"rope_dim", &c.architecture.rope_dim},
                              {"q_latent", &c.architecture.q_latent},
                              {"own_keys", &c.architecture.own_keys},
                              {"passes", &c.architecture.passes}}) {
      if (!a.contains(key)) continue;
      if (!a[key].is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat("model config: \"", key, "\" must be an integer"));
      }
      *field = a[key].get<int64_t>();
    }
  }
  // "mtp" absent: a file without multi-token prediction.
  if (auto it = j.find("mtp"); it != j.end()) {
    if (!it->is_number_integer()) {
      return absl::InvalidArgumentError("model config: \"mtp\" is not an integer");
    }
    c.mtp = it->get<int64_t>();
  }
  if (auto it = j.find("mtp_weight"); it != j.end()) {
    if (!it->is_number()) {
      return absl::InvalidArgumentError("model config: \"mtp_weight\" is not a number");
    }
    c.mtp_weight = it->get<double>();
  }
  if (auto it = j.find("moe"); it != j.end()) {
    ASSIGN_OR_RETURN(c.moe, MoeConfig::FromJson(*it));
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace smallem
