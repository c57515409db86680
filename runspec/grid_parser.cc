// GridParser's reading of a grid file's structure (runspec/grid_parser.h):
// the header keys, named variants and grid axes expanded into variants, the
// baseline and the reference curve, each spec resolved with the engine into
// canonical JSON and its hash.
#include "runspec/grid_parser.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "absl/strings/str_join.h"
#include "base/sha256.h"

namespace smallem::grid_internal {
namespace {

using nlohmann::json;

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

}  // namespace

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
  auto entries = Entries(root, 1, "the grid file", TopLevelKeyNames());
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

  const auto& [seeds_node, seeds_line] = top["seeds"];
  if (seeds_node.IsMap()) {
    absl::StatusOr<SeedSchedule> schedule = ParseSeedSchedule(seeds_node, seeds_line);
    if (!schedule.ok()) return schedule.status();
    grid_.seeds = schedule->start;
    grid_.sequential = *std::move(schedule);
  } else {
    absl::StatusOr<std::vector<int64_t>> seeds = Seeds(seeds_node, seeds_line, "seeds");
    if (!seeds.ok()) return seeds.status();
    grid_.seeds = *seeds;
  }

  if (top.contains("holm")) {
    absl::StatusOr<bool> holm = Flag(top["holm"].first, top["holm"].second, "holm");
    if (!holm.ok()) return holm.status();
    grid_.holm = *holm;
  }
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
    return Error(baseline_line, "\"baseline\": \"", Shown(*baseline), "\" is not a variant",
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

}  // namespace smallem::grid_internal
