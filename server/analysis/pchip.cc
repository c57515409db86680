#include "server/analysis/pchip.h"

#include <cmath>

#include "base/check.h"

namespace smallem {
namespace {

// Moler's three-point end slope, kept monotone.
double EndSlope(double h0, double h1, double d0, double d1) {
  double m = ((2 * h0 + h1) * d0 - h0 * d1) / (h0 + h1);
  if (m * d0 <= 0) return 0;
  if (d0 * d1 <= 0 && std::abs(m) > std::abs(3 * d0)) return 3 * d0;
  return m;
}

}  // namespace

Pchip::Pchip(std::vector<double> xs, std::vector<double> ys)
    : xs_(std::move(xs)), ys_(std::move(ys)), slopes_(xs_.size(), 0) {
  CHECK(xs_.size() == ys_.size() && xs_.size() >= 2);
  const size_t n = xs_.size();
  std::vector<double> h(n - 1), d(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) {
    h[i] = xs_[i + 1] - xs_[i];
    CHECK(h[i] > 0) << "knots must increase";
    d[i] = (ys_[i + 1] - ys_[i]) / h[i];
  }
  if (n == 2) {
    slopes_[0] = slopes_[1] = d[0];
    return;
  }
  for (size_t i = 1; i + 1 < n; ++i) {
    if (d[i - 1] * d[i] <= 0) continue;  // a local extremum: flat
    const double w1 = 2 * h[i] + h[i - 1], w2 = h[i] + 2 * h[i - 1];
    slopes_[i] = (w1 + w2) / (w1 / d[i - 1] + w2 / d[i]);
  }
  slopes_[0] = EndSlope(h[0], h[1], d[0], d[1]);
  slopes_[n - 1] = EndSlope(h[n - 2], h[n - 3], d[n - 2], d[n - 3]);
}

size_t Pchip::Interval(double x) const {
  size_t i = 0;
  while (i + 2 < xs_.size() && xs_[i + 1] <= x) ++i;
  return i;
}

double Pchip::Value(double x) const {
  if (x < xs_.front()) return ys_.front() + slopes_.front() * (x - xs_.front());
  if (x > xs_.back()) return ys_.back() + slopes_.back() * (x - xs_.back());
  const size_t i = Interval(x);
  const double h = xs_[i + 1] - xs_[i], s = (x - xs_[i]) / h;
  const double h00 = (1 + 2 * s) * (1 - s) * (1 - s), h10 = s * (1 - s) * (1 - s);
  const double h01 = s * s * (3 - 2 * s), h11 = s * s * (s - 1);
  return h00 * ys_[i] + h10 * h * slopes_[i] + h01 * ys_[i + 1] + h11 * h * slopes_[i + 1];
}

double Pchip::Slope(double x) const {
  if (x < xs_.front()) return slopes_.front();
  if (x > xs_.back()) return slopes_.back();
  const size_t i = Interval(x);
  const double h = xs_[i + 1] - xs_[i], s = (x - xs_[i]) / h;
  const double d00 = 6 * s * s - 6 * s, d10 = 3 * s * s - 4 * s + 1;
  const double d01 = -d00, d11 = 3 * s * s - 2 * s;
  return (d00 * ys_[i] + d01 * ys_[i + 1]) / h + d10 * slopes_[i] + d11 * slopes_[i + 1];
}

}  // namespace smallem
