#include "runspec/optimizer_spec.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace smallem {
namespace {

constexpr const char* kExpectedOptions = "expected period=K, norm, boost=G, stack=off";

absl::Status Bad(auto&&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

}  // namespace

std::string OptimizerSpec::ToString() const {
  if (kind == Kind::kAdamW) return "adamw";
  std::string s = schedule == Schedule::kShort ? "muon:short" : "muon";
  if (period != 1) absl::StrAppend(&s, ",period=", period);
  if (norm) absl::StrAppend(&s, ",norm");
  if (boost != 1.0) absl::StrAppend(&s, ",boost=", boost);
  if (!stack) absl::StrAppend(&s, ",stack=off");
  return s;
}

absl::StatusOr<OptimizerSpec> ParseOptimizerSpec(std::string_view text_view) {
  // Debian's abseil predates absl::string_view = std::string_view.
  const std::string text(text_view);
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  const std::string& name = parts[0];
  OptimizerSpec spec;
  if (name == "adamw") {
    if (parts.size() > 1) {
      return Bad("optimizer \"", text, "\": adamw takes no options (period=K, norm, boost=G and ",
                 "stack=off apply to muon and muon:short)");
    }
    return spec;
  }
  if (name == "muon") {
    spec.kind = OptimizerSpec::Kind::kMuon;
  } else if (name == "muon:short") {
    spec.kind = OptimizerSpec::Kind::kMuon;
    spec.schedule = OptimizerSpec::Schedule::kShort;
  } else {
    return Bad("unknown optimizer \"", name, "\" (expected adamw, muon or muon:short)");
  }

  bool seen_period = false, seen_norm = false, seen_boost = false, seen_stack = false;
  auto once = [&](bool& seen, const std::string& key) -> absl::Status {
    if (seen) return Bad("optimizer option \"", key, "\" given twice in \"", text, "\"");
    seen = true;
    return absl::OkStatus();
  };
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& option = parts[i];
    const size_t eq = option.find('=');
    const bool has_value = eq != std::string::npos;
    const std::string key = option.substr(0, eq);
    const std::string value = has_value ? option.substr(eq + 1) : "";
    if (option.empty()) {
      return Bad("empty optimizer option in \"", text, "\" (", kExpectedOptions, ")");
    }
    if (key == "period" && has_value) {
      RETURN_IF_ERROR(once(seen_period, key));
      if (!absl::SimpleAtoi(value, &spec.period) || spec.period < 1) {
        return Bad("optimizer option period=K: K must be a positive integer (got \"", value,
                   "\")");
      }
    } else if (key == "norm" && !has_value) {
      RETURN_IF_ERROR(once(seen_norm, key));
      spec.norm = true;
    } else if (key == "boost" && has_value) {
      RETURN_IF_ERROR(once(seen_boost, key));
      if (!absl::SimpleAtod(value, &spec.boost) || !std::isfinite(spec.boost) ||
          spec.boost < 1.0) {
        return Bad("optimizer option boost=G: G must be a number ≥ 1 (got \"", value, "\")");
      }
    } else if (key == "stack" && has_value) {
      RETURN_IF_ERROR(once(seen_stack, key));
      if (value == "off") spec.stack = false;
      else if (value == "on") spec.stack = true;
      else return Bad("optimizer option stack=", value, ": expected stack=off or stack=on");
    } else {
      return Bad("unknown optimizer option \"", option, "\" (", kExpectedOptions, ")");
    }
  }
  return spec;
}

}  // namespace smallem
