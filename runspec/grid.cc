#include "runspec/grid.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "nlohmann/json.hpp"
#include "runspec/grid_parser.h"

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

std::vector<int64_t> SeedSchedule::SeedsUpTo(int n) const {
  CHECK(n >= static_cast<int>(start.size()) && n <= max) << n << " seeds outside the schedule";
  std::vector<int64_t> out(start.begin(), start.end());
  int64_t next = *std::max_element(start.begin(), start.end()) + 1;
  while (static_cast<int>(out.size()) < n) out.push_back(next++);
  return out;
}

std::string SeedSchedule::ToJson() const {
  return nlohmann::json{{"start", start}, {"max", max}, {"looks", looks}}.dump();
}

absl::StatusOr<SeedSchedule> SeedSchedule::FromJson(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  SeedSchedule s;
  try {
    s.start = j.at("start").get<std::vector<int64_t>>();
    s.max = j.at("max").get<int>();
    s.looks = j.at("looks").get<std::vector<int>>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("stored seed schedule \"", std::string(text), "\" is malformed: ", e.what()));
  }
  if (s.start.empty() || s.looks.empty() || s.looks.front() != static_cast<int>(s.start.size()) ||
      s.looks.back() > s.max) {
    return absl::InvalidArgumentError(
        absl::StrCat("stored seed schedule \"", std::string(text), "\" is inconsistent"));
  }
  return s;
}

int64_t Grid::RunCountBound() const {
  const int64_t per_arm = sequential ? sequential->max : static_cast<int64_t>(seeds.size());
  int64_t runs = per_arm * static_cast<int64_t>(variants.size());
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
