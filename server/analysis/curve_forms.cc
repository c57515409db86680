#include "server/analysis/curve_forms.h"

#include <cmath>

#include "base/check.h"

namespace smallem {
namespace {

constexpr double kMinAlpha = 0.01;
constexpr int kAlphaGrid = 60, kT0Grid = 24, kGoldenSteps = 40;

struct Linear {
  double l_inf = 0, a = 0, sse = INFINITY;
};

// The weighted least-squares (L∞, A) for fixed α and t₀.
Linear SolveLinear(const std::vector<double>& ts, const std::vector<double>& ls,
                   const std::vector<double>& ws, double alpha, double t0, double t_ref) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::vector<double> xs(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    xs[i] = std::pow((ts[i] + t0) / t_ref, -alpha);
    sw += ws[i], sx += ws[i] * xs[i], sy += ws[i] * ls[i];
    sxx += ws[i] * xs[i] * xs[i], sxy += ws[i] * xs[i] * ls[i];
  }
  Linear out;
  const double det = sw * sxx - sx * sx;
  if (det > 1e-14 * sw * sxx) {
    out.a = (sw * sxy - sx * sy) / det;
    out.l_inf = (sy - out.a * sx) / sw;
  }
  if (!(det > 1e-14 * sw * sxx) || out.l_inf < 0) {
    out.l_inf = 0;
    out.a = sxy / sxx;
  }
  out.sse = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const double r = ls[i] - out.l_inf - out.a * xs[i];
    out.sse += ws[i] * r * r;
  }
  return out;
}

// Minimizes f over [lo, hi] (in the variable given), starting from a grid.
template <typename F>
double GridThenGolden(const F& f, double lo, double hi, int grid) {
  int best = 0;
  double best_value = INFINITY;
  for (int i = 0; i < grid; ++i) {
    const double v = f(lo + (hi - lo) * i / (grid - 1));
    if (v < best_value) best_value = v, best = i;
  }
  const double step = (hi - lo) / (grid - 1);
  double a = std::max(lo, lo + step * (best - 1)), b = std::min(hi, lo + step * (best + 1));
  constexpr double kPhi = 0.6180339887498949;
  double c = b - kPhi * (b - a), d = a + kPhi * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < kGoldenSteps; ++i) {
    if (fc < fd) {
      b = d, d = c, fd = fc, c = b - kPhi * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd, d = a + kPhi * (b - a), fd = f(d);
    }
  }
  const double x = fc < fd ? c : d;
  return f(x) <= best_value ? x : lo + step * best;
}

}  // namespace

const char* FormName(Form form) {
  return form == Form::kPowerLaw ? "power law" : "plateau power law";
}

int FormParameters(Form form) { return form == Form::kPowerLaw ? 3 : 4; }

double FormFit::Value(double t) const { return l_inf + a * std::pow((t + t0) / t_ref, -alpha); }

double FormFit::Slope(double t) const {
  return -alpha * a / t_ref * std::pow((t + t0) / t_ref, -alpha - 1);
}

std::optional<FormFit> FitForm(Form form, const std::vector<double>& ts,
                               const std::vector<double>& ls, const std::vector<double>& ws) {
  CHECK(ts.size() == ls.size() && ts.size() == ws.size());
  if (static_cast<int>(ts.size()) < FormParameters(form)) return std::nullopt;
  double log_sum = 0, t_min = INFINITY, t_max = 0;
  for (double t : ts) {
    CHECK(t > 0);
    log_sum += std::log(t), t_min = std::min(t_min, t), t_max = std::max(t_max, t);
  }
  const double t_ref = std::exp(log_sum / static_cast<double>(ts.size()));

  // The best α for a given t₀, searched in log α.
  auto best_alpha = [&](double t0) {
    auto sse = [&](double log_alpha) {
      return SolveLinear(ts, ls, ws, std::exp(log_alpha), t0, t_ref).sse;
    };
    return std::exp(GridThenGolden(sse, std::log(kMinAlpha), std::log(kMaxAlpha), kAlphaGrid));
  };
  double t0 = 0;
  if (form == Form::kPlateau) {
    // t₀ = 0 (the power law) against a log grid; the grid's best refined.
    auto sse_at = [&](double log_t0) {
      const double t = std::exp(log_t0);
      return SolveLinear(ts, ls, ws, best_alpha(t), t, t_ref).sse;
    };
    const double lo = std::log(0.05 * t_min), hi = std::log(20 * t_max);
    const double log_t0 = GridThenGolden(sse_at, lo, hi, kT0Grid);
    if (sse_at(log_t0) < SolveLinear(ts, ls, ws, best_alpha(0), 0, t_ref).sse) {
      t0 = std::exp(log_t0);
    }
  }
  const double alpha = best_alpha(t0);
  const Linear lin = SolveLinear(ts, ls, ws, alpha, t0, t_ref);
  if (!(lin.a > 0) || !std::isfinite(lin.sse)) return std::nullopt;
  return FormFit{.form = form, .l_inf = lin.l_inf, .a = lin.a, .alpha = alpha, .t0 = t0,
                 .t_ref = t_ref, .weighted_sse = lin.sse};
}

}  // namespace smallem
