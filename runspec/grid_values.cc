// GridParser's readers of typed values (runspec/grid_parser.h): mappings
// with known keys, strings, seeds, budgets and run-spec settings, each
// checked where it is written so that its message names the file and line,
// with the nearest valid key when one is close.
#include "runspec/grid_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_join.h"
#include "base/text.h"
#include "runspec/model_config.h"

namespace smallem::grid_internal {
namespace {

using nlohmann::json;

enum class ValueType { kString, kInteger, kNumber, kBool };

// The run-spec keys a grid may set, and their types, read from the engine's
// own canonical JSON so the two never drift apart. "data", "seed", "steps"
// and "minutes" belong to the experiment or the cell, not to a spec.
const std::map<std::string, ValueType>& SpecKeys() {
  static const auto* keys = [] {
    // checkpoint_minutes is in the canonical JSON only when not the default.
    auto* m = new std::map<std::string, ValueType>{{"arch", ValueType::kString},
                                                   {"checkpoint_minutes", ValueType::kNumber}};
    // Latent attention's keys are in the canonical JSON only when it is on.
    m->insert({{"attention", ValueType::kString}, {"kv_latent", ValueType::kInteger},
               {"rope_dim", ValueType::kInteger}, {"q_latent", ValueType::kInteger}});
    RunSpec defaults;
    defaults.budget.steps = 1;
    defaults.muon_lr = 0.01;  // optional keys appear in the JSON only when set
    defaults.mtp = 1;         // mtp and mtp_weight: only when mtp > 0
    defaults.architecture.own_keys = 1;
    defaults.architecture.passes = 2;
    defaults.moe.experts = 8;  // the mixture-of-experts keys, likewise
    const json spec = defaults.ToJson();
    for (const auto& [key, value] : spec.items()) {
      if (key == "data" || key == "seed" || key == "steps" || key == "minutes") continue;
      if (value.is_boolean()) (*m)[key] = ValueType::kBool;
      else if (value.is_number_integer()) (*m)[key] = ValueType::kInteger;
      else if (value.is_number()) (*m)[key] = ValueType::kNumber;
      else (*m)[key] = ValueType::kString;
    }
    return m;
  }();
  return *keys;
}

// A plain scalar is typed by its text; a quoted or !!str one is a string.
bool IsPlain(const YAML::Node& node) { return node.Tag() == "?"; }

std::optional<int64_t> ParseInteger(const YAML::Node& node) {
  if (!node.IsScalar() || !IsPlain(node)) return std::nullopt;
  const std::string& s = node.Scalar();
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseNumber(const YAML::Node& node) {
  if (!node.IsScalar() || !IsPlain(node)) return std::nullopt;
  const std::string& s = node.Scalar();
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::string Shown(absl::string_view text) {
  constexpr size_t kMaxShownBytes = 80;
  std::string shown = SanitizeLine(std::string(text), kMaxShownBytes);
  if (shown.size() < text.size()) shown += "…";
  return shown;
}

std::string Suggest(absl::string_view word, const std::vector<std::string>& candidates) {
  const std::string best = ClosestWord(std::string(word), candidates);
  if (!best.empty()) return absl::StrCat(" (did you mean \"", best, "\"?)");
  return absl::StrCat(" (expected one of: ", absl::StrJoin(candidates, ", "), ")");
}

const std::vector<std::string>& TopLevelKeyNames() {
  static const auto* keys = new std::vector<std::string>{
      "name", "data",     "base", "budget",    "seeds", "baseline",
      "variants", "grid", "reference", "holm"};
  return *keys;
}

std::vector<std::string> SpecKeyNames() {
  std::vector<std::string> names;
  for (const auto& [key, type] : SpecKeys()) names.push_back(key);
  return names;
}

const char* Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return "nothing";
    default: return "a scalar";
  }
}

absl::StatusOr<std::vector<std::pair<YAML::Node, YAML::Node>>> GridParser::Entries(
    const YAML::Node& node, int line, absl::string_view what,
    const std::vector<std::string>& allowed, absl::string_view noun) const {
  std::vector<std::pair<YAML::Node, YAML::Node>> out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) {
    return Error(line, what, ": expected a mapping (key: value lines or {key: value}), got ",
                 Describe(node));
  }
  std::map<std::string, int> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const int key_line = Line(it->first);
    if (!it->first.IsScalar()) return Error(key_line, what, ": keys must be plain names");
    const std::string& key = it->first.Scalar();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Error(key_line, "unknown key \"", Shown(key), "\" in ", what, Suggest(key, allowed));
    }
    if (auto [at, fresh] = seen.emplace(key, key_line); !fresh) {
      return Error(key_line, "duplicate ", noun, " \"", key, "\" in ", what, " (first at line ",
                   at->second, ")");
    }
    out.emplace_back(it->first, it->second);
  }
  return out;
}

absl::StatusOr<std::string> GridParser::String(const YAML::Node& value, int line,
                                               absl::string_view key) const {
  if (!value.IsScalar() || value.Scalar().empty()) {
    return Error(line, "\"", key, "\": expected a string, got ", Describe(value));
  }
  return value.Scalar();
}

absl::StatusOr<std::vector<int64_t>> GridParser::Seeds(const YAML::Node& value, int line,
                                                       absl::string_view key) const {
  const absl::string_view hint = " (a list of distinct non-negative integers, like [1, 2])";
  if (!value.IsSequence() || value.size() == 0) {
    return Error(line, "\"", key, "\": expected a non-empty list of seeds, got ",
                 value.IsSequence() ? "an empty list" : Describe(value), hint);
  }
  if (value.size() > kMaxSeeds) {
    return Error(line, "\"", key, "\": ", value.size(), " seeds; a grid lists at most ",
                 kMaxSeeds);
  }
  std::vector<int64_t> seeds;
  for (const YAML::Node& item : value) {
    std::optional<int64_t> seed = ParseInteger(item);
    if (!seed || *seed < 0) {
      return Error(Line(item), "\"", key, "\": bad seed \"",
                   item.IsScalar() ? Shown(item.Scalar()) : Describe(item), "\"", hint);
    }
    if (std::find(seeds.begin(), seeds.end(), *seed) != seeds.end()) {
      return Error(Line(item), "\"", key, "\": seed ", *seed, " is listed twice");
    }
    seeds.push_back(*seed);
  }
  return seeds;
}

absl::StatusOr<SeedSchedule> GridParser::ParseSeedSchedule(const YAML::Node& value,
                                                           int line) const {
  auto entries = Entries(value, line, "seeds", {"start", "max", "looks"});
  if (!entries.ok()) return entries.status();
  const absl::string_view example = " (like seeds: {start: [1, 2, 3], max: 11, looks: [3, 5, 7, 9, 11]})";
  SeedSchedule s;
  std::map<std::string, int> lines;
  for (const auto& [k, v] : *entries) {
    const std::string& key = k.Scalar();
    lines[key] = Line(k);
    if (key == "start") {
      absl::StatusOr<std::vector<int64_t>> start = Seeds(v, Line(k), "start");
      if (!start.ok()) return start.status();
      s.start = *std::move(start);
    } else if (key == "max") {
      std::optional<int64_t> max = ParseInteger(v);
      if (!max || *max < 2 || *max > kMaxSeeds) {
        return Error(Line(k), "\"max\": expected the most seeds per arm, an integer from 2 to ",
                     kMaxSeeds, ", got ",
                     v.IsScalar() ? absl::StrCat("\"", Shown(v.Scalar()), "\"") : Describe(v));
      }
      s.max = static_cast<int>(*max);
    } else {
      if (!v.IsSequence() || v.size() == 0) {
        return Error(Line(k), "\"looks\": expected a non-empty list of seed counts", example);
      }
      for (const YAML::Node& item : v) {
        std::optional<int64_t> n = ParseInteger(item);
        if (!n || *n <= 0 || *n > kMaxSeeds) {
          return Error(Line(item), "\"looks\": expected a number of seeds per arm, got ",
                       item.IsScalar() ? absl::StrCat("\"", Shown(item.Scalar()), "\"")
                                       : Describe(item));
        }
        if (!s.looks.empty() && *n <= s.looks.back()) {
          return Error(Line(item), "\"looks\": looks must increase (", *n, " follows ",
                       s.looks.back(), ")");
        }
        s.looks.push_back(static_cast<int>(*n));
      }
    }
  }
  for (const char* required : {"start", "max", "looks"}) {
    if (!lines.contains(required)) {
      return Error(line, "\"seeds\": missing \"", required, "\"", example);
    }
  }
  const int start = static_cast<int>(s.start.size());
  if (start < 2) {
    return Error(lines["start"], "\"start\": sequential seeds start with at least 2 seeds per "
                                 "arm (one seed does not measure the noise)");
  }
  if (s.looks.front() != start) {
    return Error(lines["looks"], "\"looks\": the first look is at the ", start,
                 " start seeds, got ", s.looks.front(), " (looks: [", start, ", ...])");
  }
  if (s.max < start) {
    return Error(lines["max"], "\"max\": ", s.max, " is fewer than the ", start,
                 " start seeds");
  }
  if (s.looks.back() > s.max) {
    return Error(lines["looks"], "\"looks\": the last look, ", s.looks.back(),
                 " seeds, is past max: ", s.max);
  }
  return s;
}

absl::StatusOr<bool> GridParser::Flag(const YAML::Node& value, int line,
                                      absl::string_view key) const {
  if (value.IsScalar() && IsPlain(value)) {
    const std::string& v = value.Scalar();
    if (v == "true" || v == "True" || v == "TRUE") return true;
    if (v == "false" || v == "False" || v == "FALSE") return false;
  }
  return Error(line, "\"", key, "\": expected true or false, got ",
               value.IsScalar() ? absl::StrCat("\"", Shown(value.Scalar()), "\"") : Describe(value));
}

absl::StatusOr<Budget> GridParser::ParseBudget(const YAML::Node& value, int line) const {
  auto entries = Entries(value, line, "budget", {"steps", "minutes"});
  if (!entries.ok()) return entries.status();
  if (entries->size() != 1) {
    return Error(line, "\"budget\": give exactly one of steps or minutes, like {steps: 300} "
                       "or {minutes: 2}");
  }
  const auto& [k, v] = entries->front();
  Budget budget;
  if (k.Scalar() == "steps") {
    std::optional<int64_t> steps = ParseInteger(v);
    if (!steps || *steps <= 0) {
      return Error(Line(k), "\"steps\": expected a positive integer, got ",
                   v.IsScalar() ? absl::StrCat("\"", Shown(v.Scalar()), "\"") : Describe(v));
    }
    budget.steps = *steps;
  } else {
    std::optional<double> minutes = ParseNumber(v);
    if (!minutes || *minutes <= 0) {
      return Error(Line(k), "\"minutes\": expected a positive number, got ",
                   v.IsScalar() ? absl::StrCat("\"", Shown(v.Scalar()), "\"") : Describe(v));
    }
    budget.minutes = *minutes;
  }
  return budget;
}

absl::StatusOr<std::vector<Budget>> GridParser::ParseBudgets(const YAML::Node& value,
                                                             int line) const {
  auto entries = Entries(value, line, "reference budgets", {"steps", "minutes"});
  if (!entries.ok()) return entries.status();
  if (entries->size() != 1) {
    return Error(line, "\"budgets\": give exactly one of steps or minutes, like "
                       "{steps: [1500, 3000, 6000]}");
  }
  const auto& [k, v] = entries->front();
  const bool steps = k.Scalar() == "steps";
  if (!v.IsSequence() || v.size() == 0) {
    return Error(Line(k), "\"", k.Scalar(), "\": expected a non-empty list, like [1500, 3000]");
  }
  std::vector<Budget> budgets;
  double previous = 0;
  for (const YAML::Node& item : v) {
    Budget b;
    double amount = 0;
    if (steps) {
      std::optional<int64_t> n = ParseInteger(item);
      if (n) b.steps = *n, amount = static_cast<double>(*n);
    } else {
      std::optional<double> m = ParseNumber(item);
      if (m) b.minutes = *m, amount = *m;
    }
    if (amount <= 0) {
      return Error(Line(item), "\"", k.Scalar(), "\": expected positive ",
                   steps ? "integers" : "numbers", ", got ",
                   item.IsScalar() ? absl::StrCat("\"", Shown(item.Scalar()), "\"") : Describe(item));
    }
    if (amount <= previous) {
      return Error(Line(item), "\"", k.Scalar(), "\": budgets must increase (", item.Scalar(),
                   " follows ", v[budgets.size() - 1].Scalar(), ")");
    }
    previous = amount;
    budgets.push_back(b);
  }
  return budgets;
}

absl::Status GridParser::CheckSpecKey(const std::string& key, int line) const {
  if (key == "seed") {
    return Error(line, "\"seed\" cannot be set in a run spec: list seeds once, at top "
                       "level (seeds: [1, 2])");
  }
  if (key == "steps" || key == "minutes") {
    return Error(line, "\"", key, "\" cannot be set in a run spec: the budget is set once, "
                 "at top level (budget: {", key, ": ...})");
  }
  if (key == "data") {
    return Error(line, "\"data\" cannot be set in a run spec: the dataset is set once, at "
                       "top level (data: DIR)");
  }
  if (!SpecKeys().contains(key)) {
    return Error(line, "unknown run-spec key \"", Shown(key), "\"",
                 Suggest(key, SpecKeyNames()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Setting> GridParser::SpecValue(const std::string& key, const YAML::Node& value,
                                              int line) const {
  Setting s;
  s.key = key;
  s.text = value.IsScalar() ? value.Scalar() : "";
  s.line = line;
  const ValueType type = SpecKeys().at(key);
  const char* expected = type == ValueType::kString    ? "a string"
                         : type == ValueType::kInteger ? "an integer"
                         : type == ValueType::kNumber  ? "a number"
                                                       : "true or false";
  auto wrong = [&] {
    return Error(line, "\"", key, "\": expected ", expected, ", got ",
                 value.IsScalar() ? absl::StrCat("\"", value.Scalar(), "\"") : Describe(value));
  };
  if (!value.IsScalar()) return wrong();
  switch (type) {
    case ValueType::kString: {
      // The presets and pieces are checked here so the message lands on
      // this line: `grid.yaml:14: unknown norm "rsm" (expected layer or rms)`.
      const std::string& v = value.Scalar();
      absl::Status st;
      if (key == "arch") st = Architecture::FromPreset(v).status();
      else if (key == "norm") st = ParseNorm(v).status();
      else if (key == "feed_forward" && v != "moe") st = ParseFeedForward(v).status();
      else if (key == "balance") st = ParseBalance(v).status();
      else if (key == "positions") st = ParsePositions(v).status();
      else if (key == "attention") st = ParseAttention(v).status();
      if (!st.ok()) return Error(line, st.message());
      s.value = v;
      break;
    }
    case ValueType::kInteger: {
      std::optional<int64_t> v = ParseInteger(value);
      if (!v) return wrong();
      s.value = *v;
      break;
    }
    case ValueType::kNumber: {
      std::optional<double> v = ParseNumber(value);
      if (!v) return wrong();
      s.value = *v;
      break;
    }
    case ValueType::kBool: {
      const std::string& v = value.Scalar();
      if (!IsPlain(value)) return wrong();
      if (v == "true" || v == "True" || v == "TRUE") s.value = true;
      else if (v == "false" || v == "False" || v == "FALSE") s.value = false;
      else return wrong();
      break;
    }
  }
  return s;
}

absl::StatusOr<Settings> GridParser::SpecMap(const YAML::Node& node, int line,
                                             absl::string_view what) const {
  auto entries = Entries(node, line, what, {});
  if (!entries.ok()) return entries.status();
  Settings out;
  for (const auto& [k, v] : *entries) {
    const std::string& key = k.Scalar();
    if (absl::Status st = CheckSpecKey(key, Line(k)); !st.ok()) return st;
    absl::StatusOr<Setting> s = SpecValue(key, v, Line(k));
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

}  // namespace smallem::grid_internal
