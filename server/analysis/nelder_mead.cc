#include "server/analysis/nelder_mead.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"

namespace smallem {

NelderMeadResult MinimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                    std::vector<double> start, const NelderMeadOptions& options) {
  CHECK(!start.empty());
  const size_t n = start.size();
  int evaluations = 0;
  auto eval = [&](const std::vector<double>& x) {
    ++evaluations;
    const double v = f(x);
    return std::isfinite(v) ? v : INFINITY;
  };
  std::vector<std::vector<double>> simplex(n + 1, start);
  std::vector<double> values(n + 1);
  for (size_t i = 0; i < n; ++i) simplex[i + 1][i] += options.initial_step;
  for (size_t i = 0; i <= n; ++i) values[i] = eval(simplex[i]);

  std::vector<size_t> order(n + 1);
  auto point = [&](const std::vector<double>& from, const std::vector<double>& to, double c) {
    std::vector<double> x(n);
    for (size_t j = 0; j < n; ++j) x[j] = from[j] + c * (to[j] - from[j]);
    return x;
  };
  while (evaluations < options.max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    double size = 0;
    for (size_t i = 0; i <= n; ++i) {
      for (size_t j = 0; j < n; ++j) size = std::max(size, std::abs(simplex[i][j] - simplex[best][j]));
    }
    if (size < options.tolerance) break;
    std::vector<double> centroid(n, 0.0);
    for (size_t i = 0; i <= n; ++i) {
      if (i == worst) continue;
      for (size_t j = 0; j < n; ++j) centroid[j] += simplex[i][j] / static_cast<double>(n);
    }
    const std::vector<double> reflected = point(centroid, simplex[worst], -1);
    const double fr = eval(reflected);
    if (fr < values[best]) {
      const std::vector<double> expanded = point(centroid, simplex[worst], -2);
      const double fe = eval(expanded);
      if (fe < fr) {
        simplex[worst] = expanded, values[worst] = fe;
      } else {
        simplex[worst] = reflected, values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      simplex[worst] = reflected, values[worst] = fr;
      continue;
    }
    // Contract towards the better of the worst and its reflection.
    const bool outside = fr < values[worst];
    const std::vector<double> contracted =
        point(centroid, outside ? reflected : simplex[worst], 0.5);
    const double fc = eval(contracted);
    if (fc < (outside ? fr : values[worst])) {
      simplex[worst] = contracted, values[worst] = fc;
      continue;
    }
    for (size_t i = 0; i <= n; ++i) {  // shrink towards the best
      if (i == best) continue;
      simplex[i] = point(simplex[best], simplex[i], 0.5);
      values[i] = eval(simplex[i]);
    }
  }
  const size_t best =
      static_cast<size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  return {.x = simplex[best], .value = values[best], .evaluations = evaluations};
}

}  // namespace smallem
