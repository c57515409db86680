#include "runspec/run_spec.h"

#include <cmath>
#include <iterator>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "nlohmann/json.hpp"
#include "runspec/optimizer_spec.h"
#include "runspec/run_spec_keys.h"

namespace smallem {
namespace {

using nlohmann::json;

absl::Status WrongType(std::string_view key, std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("\"", std::string(key), "\": expected ", std::string(expected)));
}

absl::Status ReadInt(const json& v, std::string_view key, int64_t* out) {
  if (!v.is_number_integer()) return WrongType(key, "an integer");
  *out = v.get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadDouble(const json& v, std::string_view key, double* out) {
  if (!v.is_number()) return WrongType(key, "a number");
  *out = v.get<double>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& v, std::string_view key, std::string* out) {
  if (!v.is_string()) return WrongType(key, "a string");
  *out = v.get<std::string>();
  return absl::OkStatus();
}

template <typename Kind>
absl::Status ReadKind(const json& v, std::string_view key,
                      absl::StatusOr<Kind> (*parse)(const std::string&), Kind* out) {
  if (!v.is_string()) return WrongType(key, "a string");
  ASSIGN_OR_RETURN(*out, parse(v.get<std::string>()));
  return absl::OkStatus();
}

constexpr const char* kKeys[] = {
    "data",   "arch",      "norm",         "feed_forward", "positions", "bias",
    "layers", "heads",     "embed",        "context",      "batch",     "steps",
    "minutes", "optimizer", "lr",          "min_lr_ratio", "warmup",    "weight_decay",
    "beta1",  "beta2",     "grad_clip",    "eval_batches", "eval_batch_size", "seed",
    "muon_lr", "checkpoint_minutes", "attention", "kv_latent", "rope_dim", "q_latent",
    "mtp", "mtp_weight", "own_keys", "passes",
    "experts", "top_k", "shared_experts", "expert_width", "moe_every", "first_dense",
    "balance", "bias_rate", "aux_coefficient"};

}  // namespace

const std::vector<std::string>& RunSpecKeyNames() {
  static const auto* names = new std::vector<std::string>(std::begin(kKeys), std::end(kKeys));
  return *names;
}

absl::Status UnknownRunSpecKey(std::string_view key) {
  const std::string shown = SanitizeLine(key, 80);
  const std::string near = ClosestWord(key, RunSpecKeyNames());
  if (!near.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown key \"", shown, "\" (did you mean \"", near, "\"?)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown key \"", shown, "\" (expected one of ",
                                                 absl::StrJoin(kKeys, ", "), ")"));
}

ModelConfig RunSpec::ModelFor(int64_t vocab) const {
  return ModelConfig{.vocab = vocab, .context = context, .layers = layers,
                     .heads = heads, .embed = embed, .architecture = architecture,
                     .mtp = mtp, .mtp_weight = mtp_weight, .moe = moe};
}

json RunSpec::ToJson() const {
  // nlohmann's json object is an ordered std::map: dump() is canonical.
  json j = {{"data", data},
            {"norm", NormName(architecture.norm)},
            {"feed_forward", FeedForwardName(architecture.feed_forward)},
            {"positions", PositionsName(architecture.positions)},
            {"bias", architecture.bias},
            {"layers", layers},
            {"heads", heads},
            {"embed", embed},
            {"context", context},
            {"batch", batch},
            {"optimizer", optimizer},
            {"lr", lr},
            {"min_lr_ratio", min_lr_ratio},
            {"warmup", warmup},
            {"weight_decay", weight_decay},
            {"beta1", beta1},
            {"beta2", beta2},
            {"grad_clip", grad_clip},
            {"eval_batches", eval_batches},
            {"eval_batch_size", eval_batch_size},
            {"seed", seed}};
  if (budget.steps) j["steps"] = *budget.steps;
  if (budget.minutes) j["minutes"] = *budget.minutes;
  if (muon_lr) j["muon_lr"] = *muon_lr;
  if (checkpoint_minutes != kDefaultCheckpointMinutes) {
    j["checkpoint_minutes"] = checkpoint_minutes;
  }
  // Latent attention's keys only when it is on: specs written before it
  // existed (all mha) keep their hashes.
  if (architecture.attention == AttentionKind::kLatent) {
    j["attention"] = AttentionName(architecture.attention);
    j["kv_latent"] = architecture.kv_latent;
    j["rope_dim"] = architecture.rope_dim;
    j["q_latent"] = architecture.q_latent;
  }
  if (mtp > 0) {
    j["mtp"] = mtp;
    j["mtp_weight"] = mtp_weight;
  }
  // Only when set: specs written before these options keep their hashes.
  if (architecture.own_keys != 0) j["own_keys"] = architecture.own_keys;
  if (architecture.passes != 1) j["passes"] = architecture.passes;
  if (moe.enabled()) {  // dense specs keep their canonical JSON and hash
    j["experts"] = moe.experts;
    j["top_k"] = moe.top_k;
    j["shared_experts"] = moe.shared;
    j["expert_width"] = moe.expert_width;
    j["moe_every"] = moe.every;
    j["first_dense"] = moe.first_dense;
    j["balance"] = BalanceName(moe.balance);
    j["bias_rate"] = moe.bias_rate;
    j["aux_coefficient"] = moe.aux_coefficient;
  }
  return j;
}

absl::StatusOr<RunSpec> RunSpec::FromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("run spec is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known |= (it.key() == k);
    if (!known) return UnknownRunSpecKey(it.key());
  }
  RunSpec s;
  // The preset first, so per-piece keys override it whatever their order.
  if (auto it = j.find("arch"); it != j.end()) {
    if (!it->is_string()) return WrongType("arch", "a string (gpt2 or modern)");
    ASSIGN_OR_RETURN(s.architecture, Architecture::FromPreset(it->get<std::string>()));
  }
  s.budget = Budget{};
  bool moe_named = false;  // feed_forward: moe
  bool kv_latent_named = false;
  absl::Status st;
  for (auto it = j.begin(); it != j.end() && st.ok(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "data") st = ReadString(v, k, &s.data);
    else if (k == "norm") st = ReadKind(v, k, &ParseNorm, &s.architecture.norm);
    else if (k == "feed_forward" && v.is_string() && v.get<std::string>() == "moe") moe_named = true;
    else if (k == "feed_forward") st = ReadKind(v, k, &ParseFeedForward, &s.architecture.feed_forward);
    else if (k == "positions") st = ReadKind(v, k, &ParsePositions, &s.architecture.positions);
    else if (k == "bias") {
      if (!v.is_boolean()) st = WrongType(k, "true or false");
      else s.architecture.bias = v.get<bool>();
    }
    else if (k == "layers") st = ReadInt(v, k, &s.layers);
    else if (k == "heads") st = ReadInt(v, k, &s.heads);
    else if (k == "embed") st = ReadInt(v, k, &s.embed);
    else if (k == "context") st = ReadInt(v, k, &s.context);
    else if (k == "batch") st = ReadInt(v, k, &s.batch);
    else if (k == "steps") {
      int64_t n = 0;
      st = ReadInt(v, k, &n);
      s.budget.steps = n;
    } else if (k == "minutes") {
      double m = 0;
      st = ReadDouble(v, k, &m);
      s.budget.minutes = m;
    }
    else if (k == "optimizer") st = ReadString(v, k, &s.optimizer);
    else if (k == "lr") st = ReadDouble(v, k, &s.lr);
    else if (k == "muon_lr") {
      double rate = 0;
      st = ReadDouble(v, k, &rate);
      s.muon_lr = rate;
    }
    else if (k == "min_lr_ratio") st = ReadDouble(v, k, &s.min_lr_ratio);
    else if (k == "warmup") st = ReadDouble(v, k, &s.warmup);
    else if (k == "weight_decay") st = ReadDouble(v, k, &s.weight_decay);
    else if (k == "beta1") st = ReadDouble(v, k, &s.beta1);
    else if (k == "beta2") st = ReadDouble(v, k, &s.beta2);
    else if (k == "grad_clip") st = ReadDouble(v, k, &s.grad_clip);
    else if (k == "eval_batches") st = ReadInt(v, k, &s.eval_batches);
    else if (k == "eval_batch_size") st = ReadInt(v, k, &s.eval_batch_size);
    else if (k == "seed") st = ReadInt(v, k, &s.seed);
    else if (k == "checkpoint_minutes") st = ReadDouble(v, k, &s.checkpoint_minutes);
    else if (k == "attention") st = ReadKind(v, k, &ParseAttention, &s.architecture.attention);
    else if (k == "kv_latent") {
      kv_latent_named = true;
      st = ReadInt(v, k, &s.architecture.kv_latent);
    }
    else if (k == "rope_dim") st = ReadInt(v, k, &s.architecture.rope_dim);
    else if (k == "q_latent") st = ReadInt(v, k, &s.architecture.q_latent);
    else if (k == "mtp") st = ReadInt(v, k, &s.mtp);
    else if (k == "mtp_weight") st = ReadDouble(v, k, &s.mtp_weight);
    else if (k == "own_keys") st = ReadInt(v, k, &s.architecture.own_keys);
    else if (k == "passes") st = ReadInt(v, k, &s.architecture.passes);
    else if (k == "experts") st = ReadInt(v, k, &s.moe.experts);
    else if (k == "top_k") st = ReadInt(v, k, &s.moe.top_k);
    else if (k == "shared_experts") st = ReadInt(v, k, &s.moe.shared);
    else if (k == "expert_width") st = ReadInt(v, k, &s.moe.expert_width);
    else if (k == "moe_every") st = ReadInt(v, k, &s.moe.every);
    else if (k == "first_dense") {
      if (!v.is_boolean()) st = WrongType(k, "true or false");
      else s.moe.first_dense = v.get<bool>();
    }
    else if (k == "balance") st = ReadKind(v, k, &ParseBalance, &s.moe.balance);
    else if (k == "bias_rate") st = ReadDouble(v, k, &s.moe.bias_rate);
    else if (k == "aux_coefficient") st = ReadDouble(v, k, &s.moe.aux_coefficient);
  }
  RETURN_IF_ERROR(st);
  if (moe_named && s.moe.experts == 0) s.moe.experts = MoeConfig::kDefaultExperts;
  // Filled in here, so the canonical spec names the width it trains with.
  if (s.architecture.attention == AttentionKind::kLatent && !kv_latent_named) {
    // A quarter of the embedding: the reference shape's 128 for C 512
    // (docs/model.md § Latent attention), at least 1.
    s.architecture.kv_latent = s.embed / 4 > 0 ? s.embed / 4 : 1;
  }
  RETURN_IF_ERROR(s.Validate());
  return s;
}

absl::Status RunSpec::Validate() const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (budget.steps && budget.minutes) return bad("give steps or minutes, not both");
  if (budget.steps && *budget.steps <= 0) return bad("\"steps\": must be positive (got ", *budget.steps, ")");
  if (budget.minutes && !(*budget.minutes > 0)) return bad("\"minutes\": must be positive");
  if (batch <= 0) return bad("\"batch\": must be positive (got ", batch, ")");
  if (!(lr > 0)) return bad("\"lr\": must be positive (got ", lr, ")");
  if (warmup < 0 || warmup >= 1) return bad("\"warmup\": a fraction of the budget in [0, 1)");
  if (min_lr_ratio < 0 || min_lr_ratio > 1) return bad("\"min_lr_ratio\": must be in [0, 1]");
  if (eval_batches <= 0) return bad("\"eval_batches\": must be positive (got ", eval_batches, ")");
  if (eval_batch_size <= 0) {
    return bad("\"eval_batch_size\": must be positive (got ", eval_batch_size, ")");
  }
  if (!(checkpoint_minutes >= 0) || !std::isfinite(checkpoint_minutes)) {
    return bad("\"checkpoint_minutes\": minutes of training between checkpoints, 0 = none "
               "(got ", checkpoint_minutes, ")");
  }
  if (muon_lr && !(*muon_lr > 0)) return bad("\"muon_lr\": must be positive (got ", *muon_lr, ")");
  if (mtp < 0 || mtp >= context) {
    return bad("\"mtp\": extra prediction depths, 0 = off, below context ", context, " (got ",
               mtp, ")");
  }
  if (!(mtp_weight >= 0) || !std::isfinite(mtp_weight)) {
    return bad("\"mtp_weight\": the weight of the extra depths' loss, a number ≥ 0 (got ",
               mtp_weight, ")");
  }
  if (absl::StatusOr<OptimizerSpec> o = ParseOptimizerSpec(optimizer); !o.ok()) {
    return bad("\"optimizer\": ", o.status().message());
  }
  if (architecture.own_keys < 0 || architecture.own_keys > layers) {
    return bad("\"own_keys\": layers that compute keys and values, 0 (all) to layers ", layers,
               " (got ", architecture.own_keys, ")");
  }
  if (architecture.passes < 1) {
    return bad("\"passes\": times the layer stack is traversed, at least 1 (got ",
               architecture.passes, ")");
  }
  // vocab is the dataset's; any legal value checks the rest of the shape.
  return ModelFor(256).Validate();
}

}  // namespace smallem
