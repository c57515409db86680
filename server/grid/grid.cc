#include "server/grid/grid.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "nlohmann/json.hpp"
#include "server/grid/grid_parser.h"

namespace smallem {

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
  return grid_internal::GridParser(file).Parse(text);
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

int64_t Grid::RunCountBound() const {
  int64_t runs = static_cast<int64_t>(seeds.size()) * static_cast<int64_t>(variants.size());
  if (reference) {
    runs += static_cast<int64_t>(reference->budgets.size()) *
            static_cast<int64_t>(reference->seeds.size());
  }
  return runs;
}

RunSpec Grid::RunSpecFor(const Cell& cell) const {
  nlohmann::json j = nlohmann::json::parse(cell.spec_json);
  j["data"] = data_dir;
  j["seed"] = cell.seed;
  if (cell.budget.steps) j["steps"] = *cell.budget.steps;
  if (cell.budget.minutes) j["minutes"] = *cell.budget.minutes;
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(j);
  CHECK(spec.ok()) << "cell of grid " << name << " no longer validates: " << spec.status();
  return *std::move(spec);
}

}  // namespace smallem
