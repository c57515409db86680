#include "server/analysis/distributions.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace smallem {
namespace {

// The continued fraction of I_x(a, b) (Numerical Recipes' betacf, Lentz's
// method), valid where x < (a + 1)/(a + b + 2).
double BetaContinuedFraction(double x, double a, double b) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

// Bisection for the x with cdf(x) = p on [lo, hi], cdf increasing.
template <typename Cdf>
double Invert(const Cdf& cdf, double p, double lo, double hi) {
  while (cdf(hi) < p) lo = hi, hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(hi)); ++i) {
    const double mid = (lo + hi) / 2;
    (cdf(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Σ xⁿ/(a(a+1)…(a+n)), the series of P(a, x)·Γ(a)·eˣ·x⁻ᵃ.
double GammaSeries(double a, double x) {
  double term = 1 / a, sum = term;
  for (int n = 1; n < 10000 && std::abs(term) > 1e-16 * std::abs(sum); ++n) {
    term *= x / (a + n);
    sum += term;
  }
  return sum;
}

// The continued fraction of Q(a, x)·Γ(a)·eˣ·x⁻ᵃ (Lentz's method), for
// x > a + 1: 1/(x + 1 − a − 1·(1 − a)/(x + 3 − a − 2·(2 − a)/(x + 5 − a − …))).
double GammaContinuedFraction(double a, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i <= 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

}  // namespace

double RegularizedLowerGamma(double a, double x) {
  CHECK(a > 0 && x >= 0) << "P(a, x) at a=" << a << " x=" << x;
  if (x == 0) return 0;
  const double log_front = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) return std::exp(log_front) * GammaSeries(a, x);
  return 1 - std::exp(log_front) * GammaContinuedFraction(a, x);
}

double ChiSquaredCdf(double x, double df) {
  CHECK(df > 0 && x >= 0) << "χ²(" << df << ") at " << x;
  return RegularizedLowerGamma(df / 2, x / 2);
}

double ChiSquaredQuantile(double p, double df) {
  CHECK(p > 0 && p < 1) << "probability " << p;
  return Invert([df](double x) { return ChiSquaredCdf(x, df); }, p, 0, df + 1);
}

double RegularizedIncompleteBeta(double x, double a, double b) {
  CHECK(x >= 0 && x <= 1 && a > 0 && b > 0) << "I_x(a, b) at x=" << x << " a=" << a << " b=" << b;
  if (x == 0 || x == 1) return x;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  // The fraction converges fast on the side of the mean; use symmetry beyond.
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(x, a, b) / a;
  return 1 - front * BetaContinuedFraction(1 - x, b, a) / b;
}

double StudentTCdf(double t, double df) {
  CHECK(df > 0) << "degrees of freedom " << df;
  const double tail = 0.5 * RegularizedIncompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  CHECK(p > 0 && p < 1) << "probability " << p;
  if (p < 0.5) return -StudentTQuantile(1 - p, df);
  if (p == 0.5) return 0;
  return Invert([df](double t) { return StudentTCdf(t, df); }, p, 0, 8);
}

double FCdf(double f, double d1, double d2) {
  CHECK(d1 > 0 && d2 > 0 && f >= 0) << "F(" << d1 << ", " << d2 << ") at " << f;
  return RegularizedIncompleteBeta(d1 * f / (d1 * f + d2), d1 / 2, d2 / 2);
}

double FQuantile(double p, double d1, double d2) {
  CHECK(p > 0 && p < 1) << "probability " << p;
  return Invert([d1, d2](double f) { return FCdf(f, d1, d2); }, p, 0, 4);
}

}  // namespace smallem
