#include "server/analysis/stats.h"

#include <cmath>

#include "base/check.h"

namespace smallem {

double Mean(const std::vector<double>& xs) {
  CHECK(!xs.empty());
  double sum = 0;
  for (double x : xs) sum += x;
  return sum / static_cast<double>(xs.size());
}

double SampleVariance(const std::vector<double>& xs) {
  CHECK_GE(xs.size(), 2u);
  const double m = Mean(xs);
  double sum = 0;
  for (double x : xs) sum += (x - m) * (x - m);
  return sum / static_cast<double>(xs.size() - 1);
}

std::optional<WelchResult> Welch(const std::vector<double>& a, const std::vector<double>& b) {
  const double va = SampleVariance(a) / static_cast<double>(a.size());
  const double vb = SampleVariance(b) / static_cast<double>(b.size());
  if (!(va + vb > 0)) return std::nullopt;
  return WelchResult{
      .t = (Mean(a) - Mean(b)) / std::sqrt(va + vb),
      .df = (va + vb) * (va + vb) /
            (va * va / static_cast<double>(a.size() - 1) +
             vb * vb / static_cast<double>(b.size() - 1))};
}

double StandardNormal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

}  // namespace smallem
