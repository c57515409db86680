#include "spec/model_config.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

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

namespace {

// The parameters of one block's feed-forward: what a token uses (`active`),
// everything trained (`total`) and the non-trained selection biases.
struct FeedForwardCount {
  int64_t active = 0, total = 0, buffers = 0;
};

FeedForwardCount CountFeedForward(const ModelConfig& m, int64_t layer) {
  const int64_t c = m.embed, f = m.ff_hidden();
  const bool bias = m.architecture.bias;
  const int64_t ff_in = m.architecture.feed_forward == FeedForwardKind::kSwiGlu ? 2 : 1;
  if (!m.moe.IsMoeLayer(layer)) {
    const int64_t n = ff_in * f * c + f * c + (bias ? ff_in * f + c : 0);
    return {n, n, 0};
  }
  // Experts carry no biases (spec/moe_config.h); the router is E × C.
  const int64_t e = m.moe.experts, w = m.moe.Width(f);
  const int64_t expert = (ff_in + 1) * w * c;
  const int64_t router = e * c;
  return {.active = router + (m.moe.top_k + m.moe.shared) * expert,
          .total = router + (e + m.moe.shared) * expert,
          .buffers = e};
}

}  // namespace

int64_t ModelConfig::ParameterCount() const {
  int64_t buffers = 0;
  for (int64_t i = 0; i < layers; ++i) buffers += CountFeedForward(*this, i).buffers;
  return TotalParameterCount() + buffers;
}

int64_t ModelConfig::TotalParameterCount() const {
  int64_t total = ActiveParameterCount();
  for (int64_t i = 0; i < layers; ++i) {
    const FeedForwardCount ff = CountFeedForward(*this, i);
    total += ff.total - ff.active;
  }
  return total;
}

int64_t ModelConfig::ActiveParameterCount() const {
  const int64_t c = embed;
  const bool bias = architecture.bias;
  const bool layer = architecture.norm == NormKind::kLayer;
  const int64_t norm = layer ? 2 * c : c;
  const int64_t attention = 2 * norm + 4 * c * c + (bias ? 4 * c : 0);
  int64_t total = vocab * c + layers * attention + norm;
  for (int64_t i = 0; i < layers; ++i) total += CountFeedForward(*this, i).active;
  if (architecture.positions == PositionKind::kLearned) total += context * c;
  return total;
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
  if (vocab > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab ", vocab, " exceeds 65536 (tokens are stored as uint16)"));
  }
  return moe.Validate();
}

nlohmann::json ModelConfig::ToJson() const {
  nlohmann::json arch = {{"norm", NormName(architecture.norm)},
                         {"feed_forward", FeedForwardName(architecture.feed_forward)},
                         {"positions", PositionsName(architecture.positions)},
                         {"bias", architecture.bias}};
  nlohmann::json j = {{"vocab", vocab},   {"context", context}, {"layers", layers},
                      {"heads", heads},   {"embed", embed},     {"architecture", arch}};
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
  }
  if (auto it = j.find("moe"); it != j.end()) {
    ASSIGN_OR_RETURN(c.moe, MoeConfig::FromJson(*it));
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace smallem
