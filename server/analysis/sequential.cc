#include "server/analysis/sequential.h"

#include <cmath>

#include "base/check.h"
#include "server/analysis/distributions.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/analysis/verdict.h"

namespace smallem {

absl::StatusOr<std::vector<LookLevel>> LookLevels(const SequentialDesign& design) {
  int last = 1;
  for (int n : design.looks) {
    if (n <= last) {
      return absl::InvalidArgumentError(absl::StrCat(
          "looks [", absl::StrJoin(design.looks, ", "),
          "]: seeds per arm must increase strictly from 2 or more (a look needs two seeds to "
          "measure the noise)"));
    }
    last = n;
  }
  if (design.looks.empty()) return absl::InvalidArgumentError("a design needs one look or more");
  std::vector<double> fractions;
  for (int n : design.looks) fractions.push_back(static_cast<double>(n) / design.looks.back());
  ASSIGN_OR_RETURN(std::vector<double> effect,
                   GroupSequentialBoundaries(design.shape, fractions, kAlpha));
  ASSIGN_OR_RETURN(std::vector<double> equivalence,
                   GroupSequentialBoundaries(design.shape, fractions, 2 * kAlpha));
  std::vector<LookLevel> out;
  for (size_t k = 0; k < design.looks.size(); ++k) {
    out.push_back({.seeds = design.looks[k],
                   .alpha = NominalLevel(effect[k]),
                   .equivalence_alpha = NominalLevel(equivalence[k]) / 2});
  }
  return out;
}

double ConditionalPower(double delta, double se, int seeds, const LookLevel& last,
                        double floor) {
  CHECK(se > 0 && seeds >= 2 && seeds < last.seeds);
  auto upper = [](double x) { return 0.5 * std::erfc(x / std::sqrt(2.0)); };
  const double f = static_cast<double>(seeds) / last.seeds;
  const double se_last = se * std::sqrt(f);
  const double sd = (1 - f) * se * std::sqrt(f / (1 - f));
  const double nu = 2.0 * last.seeds - 2;
  const double effect = std::max(floor, StudentTQuantile(1 - last.alpha / 2, nu) * se_last);
  double power = upper((effect - delta) / sd) + upper((effect + delta) / sd);
  const double margin = floor - StudentTQuantile(1 - last.equivalence_alpha, nu) * se_last;
  // P(−margin < Δ_K < margin).
  if (margin > 0) power += upper((-margin - delta) / sd) - upper((margin - delta) / sd);
  return power;
}

std::optional<double> FutilityStop(const FutilityRule& rule, const std::vector<LookLevel>& levels,
                                   size_t look, double delta, std::optional<double> se,
                                   double floor) {
  CHECK(look < levels.size());
  if (rule.below <= 0 || look + 1 == levels.size() || static_cast<int>(look) + 1 < rule.from_look ||
      !se || *se <= 0) {
    return std::nullopt;
  }
  const double power = ConditionalPower(delta, *se, levels[look].seeds, levels.back(), floor);
  if (power >= rule.below) return std::nullopt;
  return power;
}

}  // namespace smallem
