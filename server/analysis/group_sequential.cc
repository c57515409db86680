#include "server/analysis/group_sequential.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "server/analysis/distributions.h"

namespace smallem {
namespace {

// Grid intervals per unit of standard deviation in the continuation region
// (even counts for Simpson's rule): enough for crossing probabilities to
// ~1e-9, and the constants to their fourth decimal.
constexpr int kPointsPerSd = 64;

double NormalDensity(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double NormalUpper(double x) { return 0.5 * std::erfc(x / std::sqrt(2.0)); }

// Simpson weights for n + 1 points (n even) spaced h apart.
std::vector<double> SimpsonWeights(int n, double h) {
  std::vector<double> w(n + 1);
  for (int i = 0; i <= n; ++i) w[i] = (i == 0 || i == n ? 1 : (i % 2 == 1 ? 4 : 2)) * h / 3;
  return w;
}

bool ValidFractions(const std::vector<double>& fractions) {
  if (fractions.empty()) return false;
  double last = 0;
  for (double t : fractions) {
    if (!(t > last && t <= 1)) return false;
    last = t;
  }
  return true;
}

}  // namespace

const char* BoundaryShapeName(BoundaryShape shape) {
  switch (shape) {
    case BoundaryShape::kPocock: return "pocock";
    case BoundaryShape::kOBrienFleming: return "obrien-fleming";
  }
  return "?";
}

double CrossingProbability(const std::vector<double>& fractions, const std::vector<double>& z) {
  CHECK(ValidFractions(fractions)) << "information fractions must increase in (0, 1]";
  CHECK_EQ(fractions.size(), z.size());
  // The sub-density f of S_k = W(t_k) on paths that have not crossed yet,
  // on the grid of (−b_k, b_k), b_k = z_k·√t_k.
  std::vector<double> grid, density;
  double crossed = 0, previous_t = 0;
  for (size_t k = 0; k < fractions.size(); ++k) {
    CHECK(z[k] > 0) << "boundary " << z[k];
    const double t = fractions[k], step_sd = std::sqrt(t - previous_t);
    const double bound = z[k] * std::sqrt(t);
    if (k == 0) {
      crossed += 2 * NormalUpper(z[k]);
    } else {
      // Paths still inside at look k − 1 that end outside (−bound, bound).
      const std::vector<double> w = SimpsonWeights(static_cast<int>(grid.size()) - 1,
                                                   grid[1] - grid[0]);
      for (size_t i = 0; i < grid.size(); ++i) {
        crossed += w[i] * density[i] *
                   (NormalUpper((bound - grid[i]) / step_sd) +
                    NormalUpper((bound + grid[i]) / step_sd));
      }
    }
    if (k + 1 == fractions.size()) break;
    // The density at look k on its own grid.
    int n = 2 * static_cast<int>(std::ceil(kPointsPerSd * bound / step_sd));
    n = std::max(n, 64);
    const double h = 2 * bound / n;
    std::vector<double> next_grid(n + 1), next(n + 1, 0);
    for (int j = 0; j <= n; ++j) next_grid[j] = -bound + j * h;
    if (k == 0) {
      for (int j = 0; j <= n; ++j) next[j] = NormalDensity(next_grid[j] / step_sd) / step_sd;
    } else {
      const std::vector<double> w = SimpsonWeights(static_cast<int>(grid.size()) - 1,
                                                   grid[1] - grid[0]);
      for (int j = 0; j <= n; ++j) {
        double sum = 0;
        for (size_t i = 0; i < grid.size(); ++i) {
          sum += w[i] * density[i] * NormalDensity((next_grid[j] - grid[i]) / step_sd);
        }
        next[j] = sum / step_sd;
      }
    }
    grid = std::move(next_grid);
    density = std::move(next);
    previous_t = t;
  }
  return crossed;
}

absl::StatusOr<std::vector<double>> GroupSequentialBoundaries(
    BoundaryShape shape, const std::vector<double>& fractions, double alpha) {
  if (!ValidFractions(fractions)) {
    return absl::InvalidArgumentError(
        "information fractions must increase strictly in (0, 1] (seeds at each look over the "
        "seeds at the last)");
  }
  if (!(alpha > 0 && alpha < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must lie in (0, 1), got ", alpha));
  }
  auto boundaries = [&](double c) {
    std::vector<double> z;
    for (double t : fractions) {
      z.push_back(shape == BoundaryShape::kPocock ? c : c / std::sqrt(t / fractions.back()));
    }
    return z;
  };
  // The crossing probability falls as c grows; bracket and bisect.
  double lo = 0.1, hi = 10;
  while (hi - lo > 1e-8) {
    const double mid = (lo + hi) / 2;
    (CrossingProbability(fractions, boundaries(mid)) > alpha ? lo : hi) = mid;
  }
  return boundaries((lo + hi) / 2);
}

double NominalLevel(double z) { return 2 * NormalUpper(z); }

double TBoundary(double z, double df) {
  return StudentTQuantile(1 - NominalLevel(z) / 2, df);
}

}  // namespace smallem
