#include "server/analysis/curve_fit.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "server/analysis/nelder_mead.h"

namespace smallem {
namespace {

constexpr double kMinAlpha = 0.01;
constexpr int kAlphaGrid = 60, kT0Grid = 24, kGoldenSteps = 40;
// The broken power law's three nested searches use coarser grids.
constexpr int kBrokenT0Grid = 16, kBetaGrid = 10, kBrokenAlphaGrid = 24;
constexpr double kMinBeta = 0.5, kMaxBeta = 30;

struct Linear {
  double l_inf = 0, a = 0, sse = INFINITY;
};

// The weighted least-squares (L∞, A) of L = L∞ + A·x (L∞ = 0 when
// `free_offset` is false, or when it would go negative).
Linear SolveLinear(const std::vector<double>& xs, const std::vector<double>& ls,
                   const std::vector<double>& ws, bool free_offset) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    sw += ws[i], sx += ws[i] * xs[i], sy += ws[i] * ls[i];
    sxx += ws[i] * xs[i] * xs[i], sxy += ws[i] * xs[i] * ls[i];
  }
  Linear out;
  const double det = sw * sxx - sx * sx;
  const bool solvable = free_offset && det > 1e-14 * sw * sxx;
  if (solvable) {
    out.a = (sw * sxy - sx * sy) / det;
    out.l_inf = (sy - out.a * sx) / sw;
  }
  if (!solvable || out.l_inf < 0) {
    out.l_inf = 0;
    out.a = sxy / sxx;
  }
  out.sse = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ls[i] - out.l_inf - out.a * xs[i];
    out.sse += ws[i] * r * r;
  }
  return out;
}

// ln(1 + eᵘ) without overflow.
double Softplus(double u) { return u > 30 ? u + std::log1p(std::exp(-u)) : std::log1p(std::exp(u)); }

// g(t) such that the form's x(t) = exp(−α·g(t)): L = L∞ + A·x(t).
double FormLog(Form form, double t, double t0, double beta, double t_ref) {
  if (form == Form::kBrokenPowerLaw) {
    return (Softplus(beta * std::log(t / t0)) - Softplus(beta * std::log(t_ref / t0))) / beta;
  }
  return std::log((t + t0) / t_ref);
}

double FormX(Form form, double t, double alpha, double t0, double beta, double t_ref) {
  return std::exp(-alpha * FormLog(form, t, t0, beta, t_ref));
}

Linear SolveForm(Form form, const std::vector<double>& ts, const std::vector<double>& ls,
                 const std::vector<double>& ws, double alpha, double t0, double beta,
                 double t_ref) {
  std::vector<double> xs(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) xs[i] = FormX(form, ts[i], alpha, t0, beta, t_ref);
  return SolveLinear(xs, ls, ws, form != Form::kBrokenPowerLaw);
}

// Minimizes f over [lo, hi] (in the variable given), starting from a grid.
template <typename F>
double GridThenGolden(const F& f, double lo, double hi, int grid, int golden_steps = kGoldenSteps) {
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
  for (int i = 0; i < golden_steps; ++i) {
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
  switch (form) {
    case Form::kLogLinear: return "log-linear";
    case Form::kPowerLaw: return "power law";
    case Form::kPlateau: return "plateau power law";
    case Form::kBrokenPowerLaw: return "broken power law";
  }
  return "?";
}

int FormParameters(Form form) {
  switch (form) {
    case Form::kLogLinear: return 2;
    case Form::kPowerLaw: return 3;
    case Form::kPlateau: return 4;
    case Form::kBrokenPowerLaw: return 4;
  }
  return 0;
}

double FormFit::Value(double t) const {
  if (form == Form::kLogLinear) return l_inf - a * std::log(t / t_ref);
  return l_inf + a * FormX(form, t, alpha, t0, beta, t_ref);
}

double FormFit::Slope(double t) const {
  if (form == Form::kLogLinear) return -a / t;
  if (form == Form::kBrokenPowerLaw) {
    const double knee = std::exp(beta * std::log(t / t0));  // (t/t₀)^β
    return -alpha * a * FormX(form, t, alpha, t0, beta, t_ref) * knee / (t * (1 + knee));
  }
  return -alpha * a / t_ref * std::pow((t + t0) / t_ref, -alpha - 1);
}

namespace {

// t_ref and the time bounds of a fit to `ts`.
struct TimeSpan {
  double t_ref = 1, t_min = INFINITY, t_max = 0;
};
TimeSpan SpanOf(const std::vector<double>& ts) {
  TimeSpan s;
  double log_sum = 0;
  for (double t : ts) {
    CHECK(t > 0);
    log_sum += std::log(t), s.t_min = std::min(s.t_min, t), s.t_max = std::max(s.t_max, t);
  }
  s.t_ref = std::exp(log_sum / static_cast<double>(ts.size()));
  return s;
}

}  // namespace

std::optional<FormFit> RefitFormNear(const FormFit& start, const std::vector<double>& ts,
                                     const std::vector<double>& ls,
                                     const std::vector<double>& ws) {
  CHECK(ts.size() == ls.size() && ts.size() == ws.size());
  const Form form = start.form;
  if (form == Form::kLogLinear || static_cast<int>(ts.size()) < FormParameters(form)) {
    return FitForm(form, ts, ls, ws);  // linear: exact, and cheap
  }
  const TimeSpan span = SpanOf(ts);
  const bool free_t0 = form == Form::kBrokenPowerLaw || (form == Form::kPlateau && start.t0 > 0);
  const double t0_lo = std::log(0.05 * span.t_min), t0_hi = std::log(20 * span.t_max);
  // x = (ln α[, ln t₀[, ln β]]), clamped to the global search's bounds.
  struct Params {
    double alpha, t0, beta;
  };
  auto params = [&](const std::vector<double>& x) {
    Params p{std::exp(std::clamp(x[0], std::log(kMinAlpha), std::log(kMaxAlpha))), 0, 1};
    if (free_t0) p.t0 = std::exp(std::clamp(x[1], t0_lo, t0_hi));
    if (form == Form::kBrokenPowerLaw) {
      p.beta = std::exp(std::clamp(x[2], std::log(kMinBeta), std::log(kMaxBeta)));
    }
    return p;
  };
  std::vector<double> x0 = {std::log(std::clamp(start.alpha, kMinAlpha, kMaxAlpha))};
  if (free_t0) x0.push_back(std::clamp(std::log(start.t0), t0_lo, t0_hi));
  if (form == Form::kBrokenPowerLaw) x0.push_back(std::log(std::clamp(start.beta, kMinBeta, kMaxBeta)));
  auto sse = [&](const std::vector<double>& x) {
    const Params p = params(x);
    return SolveForm(form, ts, ls, ws, p.alpha, p.t0, p.beta, span.t_ref).sse;
  };
  const Params p = params(MinimizeNelderMead(sse, x0).x);
  const Linear lin = SolveForm(form, ts, ls, ws, p.alpha, p.t0, p.beta, span.t_ref);
  if (!(lin.a > 0) || !std::isfinite(lin.sse)) return std::nullopt;
  return FormFit{.form = form, .l_inf = lin.l_inf, .a = lin.a, .alpha = p.alpha, .t0 = p.t0,
                 .beta = p.beta, .t_ref = span.t_ref, .weighted_sse = lin.sse};
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
  if (form == Form::kLogLinear) {
    // L = L_ref + A·x with x = −ln(t/t_ref): weighted least squares.
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      const double x = -std::log(ts[i] / t_ref);
      sw += ws[i], sx += ws[i] * x, sy += ws[i] * ls[i], sxx += ws[i] * x * x, sxy += ws[i] * x * ls[i];
    }
    const double det = sw * sxx - sx * sx;
    if (!(det > 0)) return std::nullopt;
    FormFit fit{.form = form, .a = (sw * sxy - sx * sy) / det, .t_ref = t_ref};
    fit.l_inf = (sy - fit.a * sx) / sw;
    if (!(fit.a > 0)) return std::nullopt;
    for (size_t i = 0; i < ts.size(); ++i) {
      const double r = ls[i] - fit.Value(ts[i]);
      fit.weighted_sse += ws[i] * r * r;
    }
    return fit;
  }

  // The best α for given t₀ and β, searched in log α (x = exp(−α·g)).
  std::vector<double> gs(ts.size()), xs(ts.size());
  auto best_alpha = [&](double t0, double beta, int golden, double* sse_out) {
    for (size_t i = 0; i < ts.size(); ++i) gs[i] = FormLog(form, ts[i], t0, beta, t_ref);
    auto sse = [&](double log_alpha) {
      const double alpha = std::exp(log_alpha);
      for (size_t i = 0; i < ts.size(); ++i) xs[i] = std::exp(-alpha * gs[i]);
      return SolveLinear(xs, ls, ws, form != Form::kBrokenPowerLaw).sse;
    };
    const double log_alpha =
        GridThenGolden(sse, std::log(kMinAlpha), std::log(kMaxAlpha),
                       form == Form::kBrokenPowerLaw ? kBrokenAlphaGrid : kAlphaGrid, golden);
    if (sse_out != nullptr) *sse_out = sse(log_alpha);
    return std::exp(log_alpha);
  };
  auto sse_of = [&](double t0, double beta, int golden) {
    double sse = INFINITY;
    best_alpha(t0, beta, golden, &sse);
    return sse;
  };
  double t0 = 0, beta = 1;
  if (form == Form::kPlateau) {
    // t₀ = 0 (the power law) against a log grid; the grid's best refined.
    auto sse_at = [&](double log_t0) { return sse_of(std::exp(log_t0), 1, kGoldenSteps); };
    const double lo = std::log(0.05 * t_min), hi = std::log(20 * t_max);
    const double log_t0 = GridThenGolden(sse_at, lo, hi, kT0Grid);
    if (sse_at(log_t0) < sse_of(0, 1, kGoldenSteps)) t0 = std::exp(log_t0);
  } else if (form == Form::kBrokenPowerLaw) {
    // t₀ on a log grid, for each the best β (log grid), for each the best α.
    constexpr int kInnerGolden = 25;
    auto best_beta = [&](double t) {
      auto sse = [&](double log_beta) { return sse_of(t, std::exp(log_beta), kInnerGolden); };
      return std::exp(
          GridThenGolden(sse, std::log(kMinBeta), std::log(kMaxBeta), kBetaGrid, kInnerGolden));
    };
    auto sse_at = [&](double log_t0) {
      const double t = std::exp(log_t0);
      return sse_of(t, best_beta(t), kInnerGolden);
    };
    t0 = std::exp(GridThenGolden(sse_at, std::log(0.05 * t_min), std::log(20 * t_max),
                                 kBrokenT0Grid, kInnerGolden));
    beta = best_beta(t0);
  }
  const double alpha = best_alpha(t0, beta, kGoldenSteps, nullptr);
  const Linear lin = SolveForm(form, ts, ls, ws, alpha, t0, beta, t_ref);
  if (!(lin.a > 0) || !std::isfinite(lin.sse)) return std::nullopt;
  return FormFit{.form = form, .l_inf = lin.l_inf, .a = lin.a, .alpha = alpha, .t0 = t0,
                 .beta = beta, .t_ref = t_ref, .weighted_sse = lin.sse};
}

}  // namespace smallem
