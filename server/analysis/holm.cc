#include "server/analysis/holm.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "server/analysis/distributions.h"

namespace smallem {

double TwoSidedP(double delta, double se, double df) {
  CHECK(se > 0 && df > 0);
  return 2 * (1 - StudentTCdf(std::abs(delta) / se, df));
}

std::vector<double> HolmLevels(const std::vector<std::optional<double>>& p_values, double alpha) {
  CHECK(alpha > 0 && alpha < 1);
  const size_t k = p_values.size();
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  auto p = [&](size_t i) { return p_values[i].value_or(1.0); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p(a) < p(b); });
  std::vector<double> levels(k, alpha);
  bool stopped = false;
  double level = alpha;
  for (size_t rank = 0; rank < k; ++rank) {
    if (!stopped) level = alpha / static_cast<double>(k - rank);
    levels[order[rank]] = level;
    if (p(order[rank]) > level) stopped = true;
  }
  return levels;
}

std::vector<Judgement> JudgeFamily(const std::vector<Evidence>& family, bool holm) {
  std::vector<double> levels;
  if (holm) {
    std::vector<std::optional<double>> p_values;
    for (const Evidence& e : family) {
      p_values.push_back(e.se && *e.se > 0 ? std::optional(TwoSidedP(e.delta, *e.se, *e.df))
                                           : std::nullopt);
    }
    levels = HolmLevels(p_values, family.empty() ? kAlpha : family.front().alpha);
  }
  std::vector<Judgement> out;
  for (size_t i = 0; i < family.size(); ++i) {
    Evidence e = family[i];
    if (holm) e.alpha = levels[i];
    out.push_back(Judge(e));
  }
  return out;
}

}  // namespace smallem
