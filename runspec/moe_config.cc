#include "runspec/moe_config.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace smallem {

absl::StatusOr<BalanceKind> ParseBalance(const std::string& s) {
  if (s == "bias") return BalanceKind::kBias;
  if (s == "aux") return BalanceKind::kAux;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown balance \"", s, "\" (expected bias or aux)"));
}

const char* BalanceName(BalanceKind k) { return k == BalanceKind::kBias ? "bias" : "aux"; }

bool MoeConfig::IsMoeLayer(int64_t layer) const {
  if (!enabled()) return false;
  if (first_dense && layer == 0) return false;
  return layer % every == 0;
}

int64_t MoeConfig::Width(int64_t dense_width) const {
  if (expert_width > 0) return expert_width;
  const int64_t parts = top_k + shared;
  return (dense_width + parts - 1) / parts;
}

absl::Status MoeConfig::Validate() const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (experts < 0) return bad("\"experts\": must be 0 (dense) or positive (got ", experts, ")");
  if (!enabled()) return absl::OkStatus();
  if (top_k < 1 || top_k > experts) {
    return bad("\"top_k\": must be in [1, experts = ", experts, "] (got ", top_k, ")");
  }
  if (experts > kMaxExperts) {
    return bad("\"experts\": at most ", kMaxExperts, " (got ", experts, ")");
  }
  if (shared < 0) return bad("\"shared_experts\": must be 0 or positive (got ", shared, ")");
  if (expert_width < 0) {
    return bad("\"expert_width\": must be positive, or 0 for the dense width ÷ (top_k + "
               "shared_experts) (got ", expert_width, ")");
  }
  if (every < 1) return bad("\"moe_every\": must be positive (got ", every, ")");
  if (!(bias_rate >= 0) || bias_rate > 1) {
    return bad("\"bias_rate\": must be in [0, 1] (got ", bias_rate, ")");
  }
  if (!(aux_coefficient >= 0) || aux_coefficient > 10) {
    return bad("\"aux_coefficient\": must be in [0, 10] (got ", aux_coefficient, ")");
  }
  return absl::OkStatus();
}

nlohmann::json MoeConfig::ToJson() const {
  return {{"experts", experts},         {"top_k", top_k},
          {"shared", shared},           {"expert_width", expert_width},
          {"every", every},             {"first_dense", first_dense},
          {"balance", BalanceName(balance)}, {"bias_rate", bias_rate},
          {"aux_coefficient", aux_coefficient}};
}

absl::StatusOr<MoeConfig> MoeConfig::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("model config: \"moe\" is not an object");
  MoeConfig m;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = *it;
    auto wrong = [&](const char* expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: moe \"", k, "\" must be ", expected));
    };
    int64_t* integer = k == "experts"        ? &m.experts
                       : k == "top_k"        ? &m.top_k
                       : k == "shared"       ? &m.shared
                       : k == "expert_width" ? &m.expert_width
                       : k == "every"        ? &m.every
                                             : nullptr;
    double* number = k == "bias_rate" ? &m.bias_rate
                     : k == "aux_coefficient" ? &m.aux_coefficient
                                              : nullptr;
    if (integer != nullptr) {
      if (!v.is_number_integer()) return wrong("an integer");
      *integer = v.get<int64_t>();
    } else if (number != nullptr) {
      if (!v.is_number()) return wrong("a number");
      *number = v.get<double>();
    } else if (k == "first_dense") {
      if (!v.is_boolean()) return wrong("true or false");
      m.first_dense = v.get<bool>();
    } else if (k == "balance") {
      if (!v.is_string()) return wrong("a string (bias or aux)");
      ASSIGN_OR_RETURN(m.balance, ParseBalance(v.get<std::string>()));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("model config: unknown moe key \"", k, "\""));
    }
  }
  RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace smallem
