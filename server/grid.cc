#include "server/grid.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/check.h"
#include "engine/data/sha256.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace smallem {
namespace {

using nlohmann::json;

constexpr int kMaxVariants = 1000;  // an axis typo should not queue a million runs

enum class ValueType { kString, kInteger, kNumber, kBool };

// The run-spec keys a grid may set, and their types, read from the engine's
// own canonical JSON so the two never drift apart. "data", "seed", "steps"
// and "minutes" belong to the experiment or the cell, not to a spec.
const std::map<std::string, ValueType>& SpecKeys() {
  static const auto* keys = [] {
    auto* m = new std::map<std::string, ValueType>{{"arch", ValueType::kString}};
    RunSpec defaults;
    defaults.budget.steps = 1;
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

// Optimal-string-alignment distance: "rsm" is one edit from "rms".
int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// " (did you mean "x"?)" when a candidate is close, else the full list.
std::string Suggest(absl::string_view word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  int best_distance = 3;
  for (const std::string& c : candidates) {
    const int d = EditDistance(word, c);
    if (d < best_distance && d < static_cast<int>(std::max(word.size(), c.size()))) {
      best = &c;
      best_distance = d;
    }
  }
  if (best != nullptr) return absl::StrCat(" (did you mean \"", *best, "\"?)");
  return absl::StrCat(" (expected one of: ", absl::StrJoin(candidates, ", "), ")");
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

// One run-spec key set somewhere in the file.
struct Setting {
  std::string key;
  json value;
  std::string text;  // the scalar as written (names axis combinations)
  int line = 0;
  bool from_override = false;  // set by a variant/axis/reference, not base
};
using Settings = std::vector<Setting>;

// Later settings win. A preset (`arch`) set by an override resets the
// architecture pieces the base chose, so `{arch: modern}` means modern even
// over a base that says `norm: layer`.
Settings Merge(const Settings& base, const Settings& overrides) {
  const bool sets_arch = std::any_of(overrides.begin(), overrides.end(),
                                     [](const Setting& s) { return s.key == "arch"; });
  Settings out;
  for (const Setting& s : base) {
    const bool piece = s.key == "norm" || s.key == "feed_forward" || s.key == "positions" ||
                       s.key == "bias";
    if (sets_arch && piece) continue;
    if (std::none_of(overrides.begin(), overrides.end(),
                     [&](const Setting& o) { return o.key == s.key; })) {
      out.push_back(s);
    }
  }
  for (Setting s : overrides) {
    s.from_override = true;
    out.push_back(std::move(s));
  }
  return out;
}

struct Spec {
  std::string json;
  std::string hash;
};

struct AxisVariant {
  GridVariant variant;
  Settings overrides;
};

// The top-level keys present: key → (value, line of the key).
using Top = std::map<std::string, std::pair<YAML::Node, int>>;

// Reads one grid file; every error carries "file:line: ".
class GridParser {
 public:
  explicit GridParser(absl::string_view file_name) : file_(file_name) {}

  absl::StatusOr<Grid> Parse(absl::string_view text);

 private:
  template <typename... Parts>
  absl::Status Error(int line, const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", parts...));
  }
  static int Line(const YAML::Node& node) {
    return node.Mark().line >= 0 ? node.Mark().line + 1 : 1;
  }

  // Checks that `node` is a mapping with scalar, unique keys in `allowed`
  // (any key when empty) and returns its (key node, value node) pairs.
  absl::StatusOr<std::vector<std::pair<YAML::Node, YAML::Node>>> Entries(
      const YAML::Node& node, int line, absl::string_view what,
      const std::vector<std::string>& allowed, absl::string_view noun = "key") const;

  absl::StatusOr<std::string> String(const YAML::Node& value, int line,
                                     absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> Seeds(const YAML::Node& value, int line,
                                             absl::string_view key) const;
  absl::StatusOr<Budget> ParseBudget(const YAML::Node& value, int line) const;
  absl::StatusOr<std::vector<Budget>> ParseBudgets(const YAML::Node& value, int line) const;

  // A run-spec key and one value of it.
  absl::Status CheckSpecKey(const std::string& key, int line) const;
  absl::StatusOr<Setting> SpecValue(const std::string& key, const YAML::Node& value,
                                    int line) const;
  absl::StatusOr<Settings> SpecMap(const YAML::Node& node, int line,
                                   absl::string_view what) const;
  // The axis combinations, in order, each with the overrides that make it.
  absl::StatusOr<std::vector<AxisVariant>> Axes(const YAML::Node& node, int line,
                                                const Settings& base);
  absl::Status ParseHeader(Top& top);  // name, data, budget, seeds
  // Named variants and axis combinations, then the baseline; returns the
  // baseline's overrides.
  absl::StatusOr<Settings> ParseVariants(Top& top, const Settings& base);
  absl::Status ParseReference(const YAML::Node& node, int line, const Settings& baseline_spec);

  // Validates base ← overrides with the engine and makes it canonical.
  absl::StatusOr<Spec> Resolve(const Settings& settings, absl::string_view who, int line) const;

  std::string file_;
  Grid grid_;
};

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
      return Error(key_line, "unknown key \"", key, "\" in ", what, Suggest(key, allowed));
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
  std::vector<int64_t> seeds;
  for (const YAML::Node& item : value) {
    std::optional<int64_t> seed = ParseInteger(item);
    if (!seed || *seed < 0) {
      return Error(Line(item), "\"", key, "\": bad seed \"",
                   item.IsScalar() ? item.Scalar() : Describe(item), "\"", hint);
    }
    if (std::find(seeds.begin(), seeds.end(), *seed) != seeds.end()) {
      return Error(Line(item), "\"", key, "\": seed ", *seed, " is listed twice");
    }
    seeds.push_back(*seed);
  }
  return seeds;
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
                   v.IsScalar() ? absl::StrCat("\"", v.Scalar(), "\"") : Describe(v));
    }
    budget.steps = *steps;
  } else {
    std::optional<double> minutes = ParseNumber(v);
    if (!minutes || *minutes <= 0) {
      return Error(Line(k), "\"minutes\": expected a positive number, got ",
                   v.IsScalar() ? absl::StrCat("\"", v.Scalar(), "\"") : Describe(v));
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
                   item.IsScalar() ? absl::StrCat("\"", item.Scalar(), "\"") : Describe(item));
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
    return Error(line, "unknown run-spec key \"", key, "\"", Suggest(key, SpecKeyNames()));
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
      else if (key == "feed_forward") st = ParseFeedForward(v).status();
      else if (key == "positions") st = ParsePositions(v).status();
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

// True when `key` occurs in `text` as a whole word.
bool Mentions(absl::string_view text, absl::string_view key) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(key); at != absl::string_view::npos; at = text.find(key, at + 1)) {
    const bool starts = at == 0 || !word(text[at - 1]);
    const bool ends = at + key.size() == text.size() || !word(text[at + key.size()]);
    if (starts && ends) return true;
  }
  return false;
}

absl::StatusOr<Spec> GridParser::Resolve(const Settings& settings, absl::string_view who,
                                         int line) const {
  json j = json::object();
  for (const Setting& s : settings) j[s.key] = s.value;
  // Validate as the worker will train it, with this grid's budget and data.
  j["data"] = grid_.data_dir;
  if (grid_.budget.steps) j["steps"] = *grid_.budget.steps;
  if (grid_.budget.minutes) j["minutes"] = *grid_.budget.minutes;
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(j);
  if (!spec.ok()) {
    // Point at the key the engine complains about, preferring the one this
    // variant changed: that is most likely the change that broke it.
    const absl::string_view message = spec.status().message();
    const Setting* culprit = nullptr;
    for (bool overrides : {true, false}) {
      for (const Setting& s : settings) {
        if (!culprit && s.from_override == overrides && Mentions(message, s.key)) culprit = &s;
      }
    }
    const int at = culprit ? culprit->line : line;
    return Error(at, who, ": ", message);
  }
  json canonical = spec->ToJson();
  for (const char* key : {"data", "seed", "steps", "minutes"}) canonical.erase(key);
  Spec out;
  out.json = canonical.dump();
  out.hash = Sha256Hex(out.json);
  return out;
}

absl::StatusOr<std::vector<AxisVariant>> GridParser::Axes(const YAML::Node& node, int line,
                                                          const Settings& base) {
  auto entries = Entries(node, line, "grid", {});
  if (!entries.ok()) return entries.status();
  std::vector<Settings> combos = {{}};
  for (const auto& [k, v] : *entries) {
    const std::string& key = k.Scalar();
    if (absl::Status st = CheckSpecKey(key, Line(k)); !st.ok()) return st;
    if (!v.IsSequence() || v.size() == 0) {
      return Error(Line(k), "grid axis \"", key, "\": expected a non-empty list of values, "
                   "like [0.001, 0.003]");
    }
    std::vector<Setting> values;
    for (const YAML::Node& item : v) {
      absl::StatusOr<Setting> s = SpecValue(key, item, Line(item));
      if (!s.ok()) return s.status();
      for (const Setting& earlier : values) {
        if (earlier.value == s->value) {
          return Error(s->line, "grid axis \"", key, "\": value ", s->text,
                       " is listed twice (first at line ", earlier.line, ")");
        }
      }
      values.push_back(*std::move(s));
    }
    if (combos.size() * values.size() > kMaxVariants) {
      return Error(Line(k), "grid axes expand to more than ", kMaxVariants,
                   " variants; split the experiment");
    }
    std::vector<Settings> next;
    for (const Settings& c : combos) {
      for (const Setting& s : values) {
        next.push_back(c);
        next.back().push_back(s);
      }
    }
    combos = std::move(next);
  }
  std::vector<AxisVariant> out;
  for (const Settings& combo : combos) {
    std::vector<std::string> parts;
    for (const Setting& s : combo) parts.push_back(absl::StrCat(s.key, "=", s.text));
    GridVariant v;
    v.name = absl::StrJoin(parts, ",");
    v.line = combo.front().line;
    const std::string who = absl::StrCat("variant \"", v.name, "\"");
    absl::StatusOr<Spec> spec = Resolve(Merge(base, combo), who, v.line);
    if (!spec.ok()) return spec.status();
    v.spec_json = spec->json;
    v.spec_hash = spec->hash;
    out.push_back({std::move(v), combo});
  }
  return out;
}

absl::StatusOr<Grid> GridParser::Parse(absl::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {  // ParserException, DeepRecursion, ...
    if (e.mark.line < 0) return Error(1, "YAML error: ", e.msg);
    return Error(e.mark.line + 1, "YAML syntax error at column ", e.mark.column + 1, ": ",
                 e.msg);
  }
  if (!root.IsMap()) {
    return Error(1, "a grid file is a mapping with name, data, base, budget, seeds, baseline "
                    "and variants or grid (see docs/grid-format.md), got ", Describe(root));
  }
  static const std::vector<std::string> kTopKeys = {
      "name", "data", "base", "budget", "seeds", "baseline", "variants", "grid", "reference"};
  auto entries = Entries(root, 1, "the grid file", kTopKeys);
  if (!entries.ok()) return entries.status();
  Top top;
  for (const auto& [k, v] : *entries) top[k.Scalar()] = {v, Line(k)};
  for (const char* required : {"name", "data", "budget", "seeds", "baseline"}) {
    if (!top.contains(required)) {
      return Error(1, "missing \"", required, "\" (see docs/grid-format.md)");
    }
  }
  grid_.file_name = file_;
  if (absl::Status st = ParseHeader(top); !st.ok()) return st;
  Settings base;
  if (top.contains("base")) {
    absl::StatusOr<Settings> b = SpecMap(top["base"].first, top["base"].second, "base");
    if (!b.ok()) return b.status();
    base = *std::move(b);
  }
  absl::StatusOr<Settings> baseline_overrides = ParseVariants(top, base);
  if (!baseline_overrides.ok()) return baseline_overrides.status();
  if (top.contains("reference")) {
    // The reference trains the baseline's model: base ← baseline ← reference.
    Settings baseline_spec = Merge(base, *baseline_overrides);
    for (Setting& s : baseline_spec) s.from_override = false;
    if (absl::Status st = ParseReference(top["reference"].first, top["reference"].second,
                                         baseline_spec);
        !st.ok()) {
      return st;
    }
  }
  return std::move(grid_);
}

absl::Status GridParser::ParseHeader(Top& top) {
  const auto& [name_node, name_line] = top["name"];
  absl::StatusOr<std::string> name = String(name_node, name_line, "name");
  if (!name.ok()) return name.status();
  for (char c : *name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return Error(name_line, "\"name\": \"", *name, "\" may use only letters, digits, '.', "
                   "'_' and '-' (it names the experiment on the command line)");
    }
  }
  grid_.name = *name;

  const auto& [data_node, data_line] = top["data"];
  absl::StatusOr<std::string> data = String(data_node, data_line, "data");
  if (!data.ok()) return data.status();
  grid_.data = *data;
  std::filesystem::path dir(*data);
  if (dir.is_relative()) dir = std::filesystem::path(file_).parent_path() / dir;
  grid_.data_dir = dir.lexically_normal().string();
  if (grid_.data_dir.size() > 1 && grid_.data_dir.back() == '/') grid_.data_dir.pop_back();

  absl::StatusOr<Budget> budget = ParseBudget(top["budget"].first, top["budget"].second);
  if (!budget.ok()) return budget.status();
  grid_.budget = *budget;

  absl::StatusOr<std::vector<int64_t>> seeds =
      Seeds(top["seeds"].first, top["seeds"].second, "seeds");
  if (!seeds.ok()) return seeds.status();
  grid_.seeds = *seeds;
  return absl::OkStatus();
}

absl::StatusOr<Settings> GridParser::ParseVariants(Top& top, const Settings& base) {
  std::map<std::string, Settings> overrides;  // of the named variants
  if (top.contains("variants")) {
    const auto& [node, line] = top["variants"];
    auto variants = Entries(node, line, "variants", {}, "variant name");
    if (!variants.ok()) return variants.status();
    for (const auto& [k, v] : *variants) {
      const std::string& name = k.Scalar();
      if (name == "reference") {
        return Error(Line(k), "variant name \"reference\" is reserved for the reference "
                              "curve's runs; pick another name");
      }
      const std::string who = absl::StrCat("variant \"", name, "\"");
      absl::StatusOr<Settings> o = SpecMap(v, Line(k), who);
      if (!o.ok()) return o.status();
      absl::StatusOr<Spec> spec = Resolve(Merge(base, *o), who, Line(k));
      if (!spec.ok()) return spec.status();
      overrides[name] = *o;
      grid_.variants.push_back(
          {.name = name, .spec_json = spec->json, .spec_hash = spec->hash, .line = Line(k)});
    }
  }
  if (top.contains("grid")) {
    absl::StatusOr<std::vector<AxisVariant>> axes = Axes(top["grid"].first, top["grid"].second,
                                                         base);
    if (!axes.ok()) return axes.status();
    for (AxisVariant& a : *axes) {
      const GridVariant& v = a.variant;
      if (const GridVariant* named = grid_.FindVariant(v.name)) {
        return Error(v.line, "duplicate variant name \"", v.name, "\" (also defined at line ",
                     named->line, ")");
      }
      overrides[v.name] = std::move(a.overrides);
      grid_.variants.push_back(std::move(a.variant));
    }
  }
  if (grid_.variants.empty()) {
    const int line = top.contains("variants") ? top["variants"].second
                     : top.contains("grid")   ? top["grid"].second
                                              : 1;
    return Error(line, "empty grid: no variants and no grid axes (add variants: {baseline: {}, "
                       "rope: {positions: rope}} or grid: {lr: [0.001, 0.003]})");
  }
  if (grid_.variants.size() > kMaxVariants) {
    return Error(1, "the grid has more than ", kMaxVariants, " variants; split the experiment");
  }
  for (size_t i = 0; i < grid_.variants.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const GridVariant& a = grid_.variants[i];
      const GridVariant& b = grid_.variants[j];
      if (a.spec_hash == b.spec_hash) {
        return Error(a.line, "variant \"", a.name, "\" has the same run spec as variant \"",
                     b.name, "\" (line ", b.line,
                     "); every variant must change something, so remove one of them");
      }
    }
  }

  const auto& [baseline_node, baseline_line] = top["baseline"];
  absl::StatusOr<std::string> baseline = String(baseline_node, baseline_line, "baseline");
  if (!baseline.ok()) return baseline.status();
  if (grid_.FindVariant(*baseline) == nullptr) {
    std::vector<std::string> names;
    for (const GridVariant& v : grid_.variants) names.push_back(v.name);
    return Error(baseline_line, "\"baseline\": \"", *baseline, "\" is not a variant",
                 Suggest(*baseline, names));
  }
  grid_.baseline = *baseline;
  return overrides[grid_.baseline];
}

absl::Status GridParser::ParseReference(const YAML::Node& node, int line,
                                        const Settings& baseline_spec) {
  std::vector<std::string> allowed = SpecKeyNames();
  // The keys CheckSpecKey redirects, so they get its message, not "unknown".
  allowed.insert(allowed.end(), {"budgets", "seeds", "data", "seed", "steps", "minutes"});
  auto entries = Entries(node, line, "reference", allowed);
  if (!entries.ok()) return entries.status();
  ReferenceCurve curve;
  curve.seeds = grid_.seeds;
  Settings overrides;
  bool has_budgets = false;
  for (const auto& [k, v] : *entries) {
    const std::string& key = k.Scalar();
    if (key == "budgets") {
      absl::StatusOr<std::vector<Budget>> b = ParseBudgets(v, Line(k));
      if (!b.ok()) return b.status();
      curve.budgets = *b;
      has_budgets = true;
    } else if (key == "seeds") {
      absl::StatusOr<std::vector<int64_t>> s = Seeds(v, Line(k), "reference seeds");
      if (!s.ok()) return s.status();
      curve.seeds = *s;
    } else {
      if (absl::Status st = CheckSpecKey(key, Line(k)); !st.ok()) return st;
      absl::StatusOr<Setting> s = SpecValue(key, v, Line(k));
      if (!s.ok()) return s.status();
      overrides.push_back(*std::move(s));
    }
  }
  if (!has_budgets) {
    return Error(line, "\"reference\": missing \"budgets\" (like budgets: {steps: [1500, "
                       "3000, 6000]})");
  }
  absl::StatusOr<Spec> spec = Resolve(Merge(baseline_spec, overrides), "reference", line);
  if (!spec.ok()) return spec.status();
  curve.spec_json = spec->json;
  curve.spec_hash = spec->hash;
  grid_.reference = std::move(curve);
  return absl::OkStatus();
}

}  // namespace

std::string BudgetKey(const Budget& budget) {
  if (budget.steps) return absl::StrCat("steps:", *budget.steps);
  CHECK(budget.minutes.has_value()) << "a budget has steps or minutes";
  return absl::StrCat("minutes:", *budget.minutes);
}

std::string BudgetLabel(const Budget& budget) {
  if (budget.steps) return absl::StrCat(*budget.steps, " steps");
  CHECK(budget.minutes.has_value()) << "a budget has steps or minutes";
  return absl::StrCat(*budget.minutes, " min");
}

absl::StatusOr<Grid> ParseGrid(std::string_view yaml_text, std::string_view file_name) {
  const std::string text(yaml_text), file(file_name);
  return GridParser(file).Parse(text);
}

const GridVariant* Grid::FindVariant(std::string_view name) const {
  for (const GridVariant& v : variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::vector<Cell> Grid::Cells() const {
  std::vector<Cell> cells;
  std::set<std::string> keys;  // spec_hash/seed/budget
  auto add = [&](CellKind kind, const std::string& variant, const std::string& spec_json,
                 const std::string& spec_hash, int64_t seed, const Budget& budget) {
    if (!keys.insert(absl::StrCat(spec_hash, "/", seed, "/", BudgetKey(budget))).second) return;
    cells.push_back({.kind = kind, .variant = variant, .spec_json = spec_json,
                     .spec_hash = spec_hash, .seed = seed, .budget = budget});
  };
  for (int64_t seed : seeds) {
    for (const GridVariant& v : variants) {
      add(CellKind::kVariant, v.name, v.spec_json, v.spec_hash, seed, budget);
    }
  }
  if (reference) {
    for (const Budget& b : reference->budgets) {
      for (int64_t seed : reference->seeds) {
        add(CellKind::kReference, "reference", reference->spec_json, reference->spec_hash,
            seed, b);
      }
    }
  }
  return cells;
}

RunSpec Grid::RunSpecFor(const Cell& cell) const {
  json j = json::parse(cell.spec_json);
  j["data"] = data_dir;
  j["seed"] = cell.seed;
  if (cell.budget.steps) j["steps"] = *cell.budget.steps;
  if (cell.budget.minutes) j["minutes"] = *cell.budget.minutes;
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(j);
  CHECK(spec.ok()) << "cell of grid " << name << " no longer validates: " << spec.status();
  return *std::move(spec);
}

}  // namespace smallem
