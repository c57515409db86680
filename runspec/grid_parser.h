// Internal to the grid parser (runspec/grid_parser.cc, runspec/grid_values.cc):
// the parser class and the pieces of a grid file it passes between its
// steps. ParseGrid (runspec/grid.h) is the interface; nothing else includes
// this header.
#ifndef SMALLEM_RUNSPEC_GRID_PARSER_H_
#define SMALLEM_RUNSPEC_GRID_PARSER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "yaml-cpp/yaml.h"

namespace smallem::grid_internal {

constexpr int kMaxVariants = 1000;  // an axis typo should not queue a million runs
constexpr int kMaxSeeds = 100;      // per list: ten seeds already resolve 0.4σ

// `text` for an error message: one line, at most 80 bytes (then "…"), so a
// huge or hostile name is never echoed whole.
std::string Shown(absl::string_view text);
// " (did you mean "x"?)" when a candidate is close, else the full list.
std::string Suggest(absl::string_view word, const std::vector<std::string>& candidates);
// The run-spec keys a grid may set, in order.
std::vector<std::string> SpecKeyNames();
// The keys of a grid file's top level, in the order docs/grid-format.md
// gives them.
const std::vector<std::string>& TopLevelKeyNames();
// "a list", "a mapping", "nothing" or "a scalar": for messages.
const char* Describe(const YAML::Node& node);

// One run-spec key set somewhere in the file.
struct Setting {
  std::string key;
  nlohmann::json value;
  std::string text;  // the scalar as written (names axis combinations)
  int line = 0;
  bool from_override = false;  // set by a variant/axis/reference, not base
};
using Settings = std::vector<Setting>;

// A run spec the engine accepted, made canonical (see runspec/grid.h).
struct Spec {
  std::string json;  // without data/seed/steps/minutes
  std::string hash;  // lower-case SHA-256 hex of json
};

// One combination of the grid axes, with the overrides that make it.
struct AxisVariant {
  GridVariant variant;
  Settings overrides;
};

// The top-level keys present: key → (value, line of the key).
using Top = std::map<std::string, std::pair<YAML::Node, int>>;

// Reads one grid file; every error carries "file:line: ". One parser per
// file, used once; not thread-safe. Its methods are defined by what they
// read: grid_parser.cc the file's structure (Parse, the variants, the axes,
// the reference) and the resolving of specs; grid_values.cc typed values
// (mappings, strings, seeds and their sequential schedule, budgets, run-spec
// settings).
class GridParser {
 public:
  explicit GridParser(absl::string_view file_name) : file_(file_name) {}

  // The grid in `text`, or InvalidArgument (see ParseGrid in runspec/grid.h).
  absl::StatusOr<Grid> Parse(absl::string_view text);

 private:
  template <typename... Parts>
  absl::Status Error(int line, const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", parts...));
  }
  static int Line(const YAML::Node& node) {
    return node.Mark().line >= 0 ? node.Mark().line + 1 : 1;
  }

  // ---- grid_values.cc

  // Checks that `node` is a mapping with scalar, unique keys in `allowed`
  // (any key when empty) and returns its (key node, value node) pairs.
  absl::StatusOr<std::vector<std::pair<YAML::Node, YAML::Node>>> Entries(
      const YAML::Node& node, int line, absl::string_view what,
      const std::vector<std::string>& allowed, absl::string_view noun = "key") const;

  absl::StatusOr<std::string> String(const YAML::Node& value, int line,
                                     absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> Seeds(const YAML::Node& value, int line,
                                             absl::string_view key) const;
  // `seeds: {start: [...], max: N, looks: [...]}` (runspec/grid.h).
  absl::StatusOr<SeedSchedule> ParseSeedSchedule(const YAML::Node& value, int line) const;

  absl::StatusOr<bool> Flag(const YAML::Node& value, int line, absl::string_view key) const;
  absl::StatusOr<Budget> ParseBudget(const YAML::Node& value, int line) const;
  absl::StatusOr<std::vector<Budget>> ParseBudgets(const YAML::Node& value, int line) const;

  // A run-spec key and one value of it.
  absl::Status CheckSpecKey(const std::string& key, int line) const;
  absl::StatusOr<Setting> SpecValue(const std::string& key, const YAML::Node& value,
                                    int line) const;
  absl::StatusOr<Settings> SpecMap(const YAML::Node& node, int line,
                                   absl::string_view what) const;

  // ---- grid_parser.cc

  // The axis combinations, in order, each with the overrides that make it.
  absl::StatusOr<std::vector<AxisVariant>> Axes(const YAML::Node& node, int line,
                                                const Settings& base);
  absl::Status ParseHeader(Top& top);  // name, data, budget, seeds, holm
  // Named variants and axis combinations, then the baseline; returns the
  // baseline's overrides.
  absl::StatusOr<Settings> ParseVariants(Top& top, const Settings& base);
  absl::Status ParseReference(const YAML::Node& node, int line, const Settings& baseline_spec);

  // Validates base ← overrides with the engine and makes it canonical.
  absl::StatusOr<Spec> Resolve(const Settings& settings, absl::string_view who, int line) const;

  std::string file_;
  Grid grid_;
};

}  // namespace smallem::grid_internal

#endif  // SMALLEM_RUNSPEC_GRID_PARSER_H_
