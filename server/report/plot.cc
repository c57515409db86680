#include "server/report/plot.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/files.h"
#include "server/analysis/distributions.h"
#include "server/analysis/verdict.h"

namespace smallem {
namespace {

// Layout, in SVG user units (pixels at 100 %).
constexpr double kWidth = 1080, kHeight = 490;
constexpr double kPanelTop = 60, kPanelWidth = 430, kPanelHeight = 340;
// What an x tick label may take: the 12 px sans-serif font's widest glyph
// the labels use ('m' of "min", 10 px) would overstate digits (6.7 px); 7.5
// px a character bounds every label these axes print, with this gap between.
constexpr double kTickLabelCharWidth = 7.5, kTickLabelGap = 4;
constexpr double kPanelLeft[2] = {80, 620};
constexpr double kLegendTop = 455;
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr const char* kReferenceColor = "#222222";
constexpr int kCurveSamples = 48;  // segments R(t) is drawn with

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

// "45 s", "2.5 min", "1.2 h".
std::string TimeLabel(double seconds) {
  if (seconds < 120) return absl::StrFormat("%.3g s", seconds);
  if (seconds < 7200) return absl::StrFormat("%.3g min", seconds / 60);
  return absl::StrFormat("%.3g h", seconds / 3600);
}
std::string StepsLabel(double steps) { return absl::StrFormat("%.0f", steps); }

// A log-x (or linear-x), linear-y mapping of data onto one panel.
struct Axes {
  double left = 0;
  bool log = true;
  double lo = 0, hi = 1;  // the x range: its ln on a log axis
  double y_lo = 0, y_hi = 1;

  double U(double x) const { return log ? std::log(x) : x; }
  double X(double x) const { return left + kPanelWidth * (U(x) - lo) / (hi - lo); }
  double Y(double y) const { return kPanelTop + kPanelHeight * (y_hi - y) / (y_hi - y_lo); }
  double x_lo() const { return log ? std::exp(lo) : lo; }
  double x_hi() const { return log ? std::exp(hi) : hi; }
};

// Ranges covering `xs` (positive) and `ys`, padded; sane when empty or flat.
// A linear x axis starts at 0 and leaves a tenth of its width right of the
// data (where the steps panel draws its intervals).
Axes MakeAxes(double left, std::vector<double> xs, std::vector<double> ys, bool log = true) {
  Axes a;
  a.left = left;
  a.log = log;
  xs.erase(std::remove_if(xs.begin(), xs.end(), [](double x) { return !(x > 0); }), xs.end());
  if (xs.empty()) xs = {1, 10};
  const auto [xmin, xmax] = std::minmax_element(xs.begin(), xs.end());
  if (log) {
    a.lo = std::log(*xmin);
    a.hi = std::log(*xmax);
    const double pad = std::max(0.08 * (a.hi - a.lo), 0.1);
    a.lo -= pad;
    a.hi += pad;
  } else {
    a.lo = 0;
    a.hi = *xmax * 1.1;
  }
  if (ys.empty()) ys = {0, 1};
  const auto [ymin, ymax] = std::minmax_element(ys.begin(), ys.end());
  const double ypad = std::max(0.06 * (*ymax - *ymin), 1e-3);
  a.y_lo = *ymin - ypad;
  a.y_hi = *ymax + ypad;
  return a;
}

// About `target` round values across [lo, hi] (steps of 1, 2 or 5 × 10^k,
// so sometimes fewer), and the decimals they need.
std::vector<double> LinearTicks(double lo, double hi, int* decimals, int target = 5) {
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  *decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-12; v += step) ticks.push_back(v);
  return ticks;
}

// Tick values for a log axis: inside the drawn range, three or more, and
// reaching across it (no end of the data further than a third of the panel
// from a tick). Tried in order: 1-2-5 per decade; every integer multiple of
// a power of ten; round linear steps — what a narrow range needs (every
// point at 1,500 steps; times between 35 and 45 s), where the first two
// give one tick or none, or ticks bunched at one end.
std::vector<double> LogTicks(const Axes& a) {
  auto per_decade = [&](const std::vector<int>& mantissas) {
    std::vector<double> ticks;
    for (int k = static_cast<int>(std::floor(a.lo / std::log(10.0)));
         k <= static_cast<int>(std::ceil(a.hi / std::log(10.0))); ++k) {
      for (int m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (v >= a.x_lo() && v <= a.x_hi()) ticks.push_back(v);
      }
    }
    return ticks;
  };
  auto reaches_across = [&](const std::vector<double>& ticks) {
    if (ticks.size() < 3) return false;
    const double span = a.hi - a.lo;
    return (std::log(ticks.front()) - a.lo) / span <= 1.0 / 3 &&
           (a.hi - std::log(ticks.back())) / span <= 1.0 / 3;
  };
  for (const std::vector<int>& mantissas :
       {std::vector<int>{1, 2, 5}, std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    std::vector<double> ticks = per_decade(mantissas);
    if (reaches_across(ticks)) return ticks;
  }
  std::vector<double> ticks;
  for (int target : {5, 8}) {  // a step of 5 × 10^k may leave two ticks: a finer one
    int decimals = 0;
    ticks = LinearTicks(a.x_lo(), a.x_hi(), &decimals, target);
    ticks.erase(std::remove_if(ticks.begin(), ticks.end(), [](double v) { return !(v > 0); }),
                ticks.end());
    if (ticks.size() >= 3) break;
  }
  return ticks;
}

// The x ticks of either kind of axis.
std::vector<double> XTicks(const Axes& a) {
  if (a.log) return LogTicks(a);
  int decimals = 0;
  return LinearTicks(a.x_lo(), a.x_hi(), &decimals);
}

void Frame(const Axes& a, const std::string& x_title, const std::string& y_title, bool time_axis,
           std::string& svg) {
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", Num(a.left), "\" y=\"", Num(kPanelTop),
                  "\" width=\"", Num(kPanelWidth), "\" height=\"", Num(kPanelHeight),
                  "\" fill=\"none\" stroke=\"#444\"/>\n");
  // Every tick is drawn; a label that would run into the last one drawn
  // is left out ("0.7 s0.8 s0.9 s1 s" where 1–9 per decade crowd a wide
  // range), each label taken as kTickLabelCharWidth per character.
  double last_label_right = -1e9;
  for (double v : XTicks(a)) {
    const double x = a.X(v);
    absl::StrAppend(&svg, "<line class=\"tick\" x1=\"", Num(x), "\" y1=\"",
                    Num(kPanelTop + kPanelHeight), "\" x2=\"", Num(x), "\" y2=\"",
                    Num(kPanelTop + kPanelHeight + 5), "\" stroke=\"#444\"/>\n");
    const std::string label = time_axis ? TimeLabel(v) : StepsLabel(v);
    const double half = kTickLabelCharWidth * static_cast<double>(label.size()) / 2;
    if (x - half < last_label_right + kTickLabelGap) continue;
    last_label_right = x + half;
    absl::StrAppend(&svg, "<text class=\"tick-label\" x=\"", Num(x), "\" y=\"",
                    Num(kPanelTop + kPanelHeight + 18), "\" text-anchor=\"middle\">",
                    Escape(label), "</text>\n");
  }
  int decimals = 0;
  for (double v : LinearTicks(a.y_lo, a.y_hi, &decimals)) {
    const double y = a.Y(v);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(a.left), "\" y1=\"", Num(y), "\" x2=\"",
                    Num(a.left + kPanelWidth), "\" y2=\"", Num(y), "\" stroke=\"#ddd\"/>\n");
    absl::StrAppend(&svg, "<text class=\"tick-label\" x=\"", Num(a.left - 6), "\" y=\"", Num(y + 4),
                    "\" text-anchor=\"end\">", absl::StrFormat("%.*f", decimals, v), "</text>\n");
  }
  absl::StrAppend(&svg, "<text class=\"axis-title\" x=\"", Num(a.left + kPanelWidth / 2), "\" y=\"",
                  Num(kPanelTop + kPanelHeight + 38), "\" text-anchor=\"middle\">", Escape(x_title),
                  "</text>\n");
  const double yc = kPanelTop + kPanelHeight / 2;
  absl::StrAppend(&svg, "<text class=\"axis-title\" x=\"", Num(a.left - 58), "\" y=\"", Num(yc),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 ", Num(a.left - 58), " ",
                  Num(yc), ")\">", Escape(y_title), "</text>\n");
}

std::string Points(const Axes& a, const std::vector<PlotPoint>& pts) {
  std::vector<std::string> out;
  for (const PlotPoint& p : pts) out.push_back(absl::StrCat(Num(a.X(p.x)), ",", Num(a.Y(p.y))));
  return absl::StrJoin(out, " ");
}

void Circles(const Axes& a, const std::vector<PlotPoint>& pts, const char* color,
             const std::string& name, bool time_axis, std::string& svg) {
  for (const PlotPoint& p : pts) {
    absl::StrAppend(&svg, "<circle cx=\"", Num(a.X(p.x)), "\" cy=\"", Num(a.Y(p.y)),
                    "\" r=\"3.5\" fill=\"", color, "\" fill-opacity=\"0.8\"><title>", Escape(name),
                    ": ", time_axis ? TimeLabel(p.x) : StepsLabel(p.x) + " steps",
                    absl::StrFormat(", %.4f", p.y), "</title></circle>\n");
  }
}

void Squares(const Axes& a, const std::vector<PlotPoint>& pts, bool time_axis, std::string& svg) {
  for (const PlotPoint& p : pts) {
    absl::StrAppend(&svg, "<rect x=\"", Num(a.X(p.x) - 3.5), "\" y=\"", Num(a.Y(p.y) - 3.5),
                    "\" width=\"7\" height=\"7\" fill=\"", kReferenceColor, "\"><title>reference: ",
                    time_axis ? TimeLabel(p.x) : StepsLabel(p.x) + " steps",
                    absl::StrFormat(", %.4f", p.y), "</title></rect>\n");
  }
}

void TimePanel(const PlotData& d, std::string& svg) {
  std::vector<double> xs, ys;
  for (const PlotPoint& p : d.reference_points) xs.push_back(p.x), ys.push_back(p.y);
  for (const PlotSeries& s : d.variants) {
    for (const PlotPoint& p : s.time) xs.push_back(p.x), ys.push_back(p.y);
  }
  // R(t) sampled over the plotted span (the points, plus the variants' times
  // beyond them, extrapolated), and its band R ± t·SE_R.
  std::vector<PlotPoint> inside, below, above, upper, lower;
  if (d.curve) {
    const double t0 = d.curve->first_seconds(), t1 = d.curve->last_seconds();
    double tmin = t0, tmax = t1;
    for (double x : xs) {
      if (x > 0) tmin = std::min(tmin, x), tmax = std::max(tmax, x);
    }
    std::vector<double> ts;
    for (int i = 0; i <= kCurveSamples; ++i) {
      ts.push_back(tmin * std::pow(tmax / tmin, static_cast<double>(i) / kCurveSamples));
    }
    for (const CurvePoint& p : d.curve->points()) ts.push_back(p.seconds);
    std::sort(ts.begin(), ts.end());
    for (double t : ts) {
      const PlotPoint p{t, d.curve->Interpolate(t).value};
      if (t <= t0) below.push_back(p);
      if (t >= t0 && t <= t1) inside.push_back(p);
      if (t >= t1) above.push_back(p);
      if (d.bootstrap && d.band_t > 0) {
        const double half = d.band_t * d.bootstrap->Se(t);
        upper.push_back({t, p.y + half}), lower.push_back({t, p.y - half});
      }
      ys.push_back(p.y);
    }
    if (!(tmin < t0)) below.clear();
    if (!(tmax > t1)) above.clear();
    for (const PlotPoint& p : upper) ys.push_back(p.y);
    for (const PlotPoint& p : lower) ys.push_back(p.y);
  }
  const Axes a = MakeAxes(kPanelLeft[0], xs, ys);
  absl::StrAppend(&svg, "<g class=\"panel\" id=\"time-panel\">\n");
  absl::StrAppend(&svg, "<text class=\"panel-title\" x=\"", Num(a.left + kPanelWidth / 2),
                  "\" y=\"", Num(kPanelTop - 10),
                  "\" text-anchor=\"middle\">loss against training time</text>\n");
  Frame(a, "training time (log scale)", "validation loss (nats/byte)", true, svg);
  if (d.curve) {
    if (!upper.empty()) {
      std::vector<PlotPoint> band = upper;
      band.insert(band.end(), lower.rbegin(), lower.rend());
      absl::StrAppend(&svg, "<polygon class=\"reference-band\" points=\"", Points(a, band),
                      "\" fill=\"#888\" fill-opacity=\"0.18\" stroke=\"none\"><title>",
                      absl::StrFormat("R(t) ± t·SE_R(t), t = %.3f (bootstrap, %d resamples)",
                                      d.band_t, d.bootstrap->resamples()),
                      "</title></polygon>\n");
    }
    absl::StrAppend(&svg, "<polyline class=\"reference-line\" points=\"", Points(a, inside),
                    "\" fill=\"none\" stroke=\"", kReferenceColor, "\" stroke-width=\"1.5\"><title>",
                    Escape(d.curve->Describe()), "</title></polyline>\n");
    for (const auto* part : {&below, &above}) {
      if (part->empty()) continue;
      absl::StrAppend(&svg, "<polyline class=\"reference-extrapolated\" points=\"",
                      Points(a, *part), "\" fill=\"none\" stroke=\"", kReferenceColor,
                      "\" stroke-width=\"1.2\" stroke-dasharray=\"5,4\"/>\n");
    }
  }
  if (!d.reference_points.empty()) {
    absl::StrAppend(&svg, "<g class=\"series\" data-series=\"reference\">\n");
    Squares(a, d.reference_points, true, svg);
    absl::StrAppend(&svg, "</g>\n");
  }
  for (size_t i = 0; i < d.variants.size(); ++i) {
    absl::StrAppend(&svg, "<g class=\"series\" data-series=\"variant:", Escape(d.variants[i].name),
                    "\">\n");
    Circles(a, d.variants[i].time, kColors[i % std::size(kColors)], d.variants[i].name, true, svg);
    absl::StrAppend(&svg, "</g>\n");
  }
  absl::StrAppend(&svg, "</g>\n");
}

// The Δ of each compared variant at the budget: its mean's 95 % interval
// (the baseline's mean + Δ's interval) as a vertical bar just right of the
// budget, one bar per variant side by side, and the list of them in the
// panel's lower left corner, which the falling curves leave empty.
void DeltaIntervals(const PlotData& d, const Axes& a, std::string& svg) {
  if (!d.budget_steps || !d.baseline_mean) return;
  const double x0 = a.X(*d.budget_steps);
  const double base = *d.baseline_mean;
  absl::StrAppend(&svg, "<line class=\"baseline-mean\" x1=\"", Num(x0 - 6), "\" y1=\"",
                  Num(a.Y(base)), "\" x2=\"", Num(x0 + 30), "\" y2=\"", Num(a.Y(base)),
                  "\" stroke=\"", kColors[0], "\" stroke-dasharray=\"3,2\"><title>",
                  absl::StrFormat("baseline mean at %s steps: %.4f", StepsLabel(*d.budget_steps),
                                  base),
                  "</title></line>\n");
  std::vector<std::string> lines;
  int drawn = 0;
  for (size_t i = 0; i < d.variants.size(); ++i) {
    const PlotSeries& s = d.variants[i];
    if (!s.delta || !s.ci_low || !s.ci_high) continue;
    const char* color = kColors[i % std::size(kColors)];
    const std::string text =
        absl::StrFormat("%s %+.4f [%+.4f, %+.4f] %s", s.name, *s.delta, *s.ci_low, *s.ci_high,
                        s.verdict);
    const double x = x0 + 7 * (++drawn);
    absl::StrAppend(&svg, "<g class=\"delta\" data-delta=\"variant:", Escape(s.name), "\">");
    absl::StrAppend(&svg, "<line class=\"delta-interval\" x1=\"", Num(x), "\" y1=\"",
                    Num(a.Y(base + *s.ci_high)), "\" x2=\"", Num(x), "\" y2=\"",
                    Num(a.Y(base + *s.ci_low)), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"><title>", Escape(s.name), ": Δ ",
                    absl::StrFormat("%+.4f, 95 %% interval [%+.4f, %+.4f] at %s steps, %s",
                                    *s.delta, *s.ci_low, *s.ci_high,
                                    StepsLabel(*d.budget_steps), s.verdict),
                    "</title></line>");
    absl::StrAppend(&svg, "<line class=\"delta-mean\" x1=\"", Num(x - 4), "\" y1=\"",
                    Num(a.Y(base + *s.delta)), "\" x2=\"", Num(x + 4), "\" y2=\"",
                    Num(a.Y(base + *s.delta)), "\" stroke=\"", color,
                    "\" stroke-width=\"2\"/></g>\n");
    lines.push_back(text);
  }
  if (lines.empty()) return;
  lines.insert(lines.begin(),
               absl::StrCat("Δ at ", StepsLabel(*d.budget_steps), " steps [95 % interval]"));
  const double bottom = kPanelTop + kPanelHeight - 8;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StrAppend(&svg, "<text class=\"delta-label\" x=\"", Num(a.left + 8), "\" y=\"",
                    Num(bottom - 15.0 * static_cast<double>(lines.size() - 1 - i)),
                    "\" font-size=\"11\">", Escape(lines[i]), "</text>\n");
  }
}

void StepsPanel(const PlotData& d, std::string& svg) {
  std::vector<double> xs, ys;
  for (const PlotPoint& p : d.reference_steps) xs.push_back(p.x), ys.push_back(p.y);
  for (const PlotSeries& s : d.variants) {
    for (const PlotPoint& p : s.steps) xs.push_back(p.x), ys.push_back(p.y);
    for (const PlotPoint& p : s.training) xs.push_back(p.x), ys.push_back(p.y);
    if (d.baseline_mean && s.ci_low && s.ci_high) {
      ys.push_back(*d.baseline_mean + *s.ci_low), ys.push_back(*d.baseline_mean + *s.ci_high);
    }
  }
  if (d.budget_steps) xs.push_back(*d.budget_steps);
  // A log axis only where the steps span enough for one: final points all
  // at one budget on a log scale read as 1,400–1,600 "log" steps.
  bool log = false;
  if (!xs.empty()) {
    const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
    log = *lo > 0 && *hi >= 3 * *lo;
  }
  const Axes a = MakeAxes(kPanelLeft[1], xs, ys, log);
  absl::StrAppend(&svg, "<g class=\"panel\" id=\"steps-panel\">\n");
  bool curves = false;
  for (const PlotSeries& s : d.variants) curves |= s.training.size() > 1;
  absl::StrAppend(&svg, "<text class=\"panel-title\" x=\"", Num(a.left + kPanelWidth / 2),
                  "\" y=\"", Num(kPanelTop - 10), "\" text-anchor=\"middle\">",
                  curves ? "loss against steps (lines: training, markers: validation)"
                         : "validation loss against steps",
                  "</text>\n");
  Frame(a, log ? "optimizer steps (log scale)" : "optimizer steps",
        curves ? "loss (nats/byte)" : "validation loss (nats/byte)", false, svg);
  if (!d.reference_steps.empty()) {
    // The mean of each budget, joined.
    std::map<double, std::pair<double, int>> by_steps;
    for (const PlotPoint& p : d.reference_steps) {
      by_steps[p.x].first += p.y;
      ++by_steps[p.x].second;
    }
    std::vector<PlotPoint> means;
    for (const auto& [x, sum] : by_steps) means.push_back({x, sum.first / sum.second});
    absl::StrAppend(&svg, "<polyline class=\"reference-line\" points=\"", Points(a, means),
                    "\" fill=\"none\" stroke=\"", kReferenceColor, "\" stroke-width=\"1.5\"/>\n");
    absl::StrAppend(&svg, "<g class=\"series\" data-series=\"reference\">\n");
    Squares(a, d.reference_steps, false, svg);
    absl::StrAppend(&svg, "</g>\n");
  }
  for (size_t i = 0; i < d.variants.size(); ++i) {
    const PlotSeries& s = d.variants[i];
    const char* color = kColors[i % std::size(kColors)];
    absl::StrAppend(&svg, "<g class=\"series\" data-series=\"variant:", Escape(s.name), "\">\n");
    if (s.training.size() > 1) {
      absl::StrAppend(&svg, "<polyline class=\"training-curve\" points=\"", Points(a, s.training),
                      "\" fill=\"none\" stroke=\"", color,
                      "\" stroke-width=\"1.2\" stroke-opacity=\"0.85\"><title>", Escape(s.name),
                      ": training loss, mean of its seeds' progress points, in nats/byte at "
                      "the validation text's bytes per token</title></polyline>\n");
    }
    Circles(a, s.steps, color, s.name, false, svg);
    absl::StrAppend(&svg, "</g>\n");
  }
  DeltaIntervals(d, a, svg);
  absl::StrAppend(&svg, "</g>\n");
}

void Legend(const PlotData& d, std::string& svg) {
  absl::StrAppend(&svg, "<g class=\"legend\">\n");
  double x = kPanelLeft[0], y = kLegendTop;
  auto advance = [&](const std::string& label) {
    x += 30 + 7.5 * static_cast<double>(label.size());
    if (x > kWidth - 150) x = kPanelLeft[0], y += 20;
  };
  if (!d.reference_points.empty() || !d.reference_steps.empty()) {
    const std::string label = "reference (mean of its seeds per budget)";
    absl::StrAppend(&svg, "<rect x=\"", Num(x), "\" y=\"", Num(y - 8),
                    "\" width=\"8\" height=\"8\" fill=\"", kReferenceColor,
                    "\"/><text class=\"legend-label\" x=\"", Num(x + 14), "\" y=\"", Num(y), "\">",
                    Escape(label), "</text>\n");
    advance(label);
  }
  if (d.bootstrap && d.band_t > 0 && d.curve) {
    const std::string label = "R(t) ± t·SE_R(t) (95 %)";
    absl::StrAppend(&svg, "<rect x=\"", Num(x), "\" y=\"", Num(y - 8),
                    "\" width=\"14\" height=\"8\" fill=\"#888\" fill-opacity=\"0.3\"/>"
                    "<text class=\"legend-label\" x=\"",
                    Num(x + 20), "\" y=\"", Num(y), "\">", Escape(label), "</text>\n");
    advance(label);
  }
  for (size_t i = 0; i < d.variants.size(); ++i) {
    absl::StrAppend(&svg, "<circle cx=\"", Num(x + 4), "\" cy=\"", Num(y - 4), "\" r=\"4\" fill=\"",
                    kColors[i % std::size(kColors)], "\"/><text class=\"legend-label\" x=\"",
                    Num(x + 14), "\" y=\"", Num(y), "\">", Escape(d.variants[i].name), "</text>\n");
    advance(d.variants[i].name);
  }
  absl::StrAppend(&svg, "</g>\n");
}

std::vector<PlotPoint> Zip(const std::vector<double>& xs, const std::vector<double>& ys) {
  std::vector<PlotPoint> out;
  for (size_t i = 0; i < xs.size() && i < ys.size(); ++i) {
    if (xs[i] > 0) out.push_back({xs[i], ys[i]});
  }
  return out;
}

std::vector<PlotPoint> Zip(const std::vector<int64_t>& xs, const std::vector<double>& ys) {
  std::vector<double> d(xs.begin(), xs.end());
  return Zip(d, ys);
}

// Fills the series of `d` (parallel to `steps.rows`) with each row's Δ at
// equal steps and its training curve: the mean over the curves of its runs
// on the compared device class, at the steps all of them have.
void AddStepsComparison(const Report& steps, const std::vector<TrainingCurve>& curves,
                        PlotData& d) {
  CHECK_EQ(d.variants.size(), steps.rows.size());
  if (steps.budget.steps) d.budget_steps = static_cast<double>(*steps.budget.steps);
  if (!steps.rows.empty()) d.baseline_mean = steps.rows[0].mean_loss;
  for (size_t i = 0; i < steps.rows.size(); ++i) {
    const ReportRow& row = steps.rows[i];
    PlotSeries& s = d.variants[i];
    s.verdict = VerdictName(row.verdict);
    if (row.delta && row.ci_low && row.ci_high) {
      s.delta = row.delta, s.ci_low = row.ci_low, s.ci_high = row.ci_high;
    }
    std::map<double, std::pair<double, int>> by_step;
    int n = 0;
    for (const TrainingCurve& c : curves) {
      if (c.variant != row.variant || c.device_class != steps.device_class || c.points.empty()) {
        continue;
      }
      ++n;
      for (const PlotPoint& p : c.points) {
        by_step[p.x].first += p.y;
        ++by_step[p.x].second;
      }
    }
    for (const auto& [x, sum] : by_step) {
      if (sum.second == n && x > 0) s.training.push_back({x, sum.first / n});
    }
  }
}

}  // namespace

PlotData PlotDataFor(const TimeReport& report, const std::vector<TrainingCurve>& curves) {
  PlotData d;
  d.title = absl::StrCat(report.steps.experiment,
                         " — validation loss by training time and by "
                         "steps",
                         report.device_class.empty() ? "" : ", device class ", report.device_class);
  if (report.choice) {
    d.curve = report.choice->curve;
    if (report.bootstrap && report.choice->sigma_df > 0 && report.bootstrap->resamples() > 1) {
      d.bootstrap = report.bootstrap;
      d.band_t = StudentTQuantile(0.975, report.choice->sigma_df);
    }
  }
  for (const CurvePoint& p : report.curve) {
    if (p.seconds > 0) d.reference_points.push_back({p.seconds, p.loss});
    for (const PlotPoint& s : Zip(p.seed_steps, p.seed_losses)) d.reference_steps.push_back(s);
  }
  for (const TimeRow& row : report.rows) {
    PlotSeries s;
    s.name = row.variant;
    s.time = Zip(row.seconds, row.losses);
    s.steps = Zip(row.steps, row.losses);
    d.variants.push_back(std::move(s));
  }
  AddStepsComparison(report.steps, curves, d);
  return d;
}

PlotData PlotDataFor(const Report& report, const ComparisonPlan& plan,
                     const std::vector<ComparedRun>& runs,
                     const std::vector<TrainingCurve>& curves) {
  PlotData d;
  d.title = absl::StrCat(report.experiment, " — validation loss by training time and by steps",
                         report.device_class.empty() ? "" : ", device class ", report.device_class);
  for (const ReportRow& row : report.rows) {
    PlotSeries s;
    s.name = row.variant;
    for (int64_t seed : plan.SeedsOf(row.variant)) {
      for (const ComparedRun& r : runs) {
        if (r.variant != row.variant || r.seed != seed || r.state != RunState::kSucceeded ||
            r.device_class != report.device_class || r.budget.steps != plan.budget.steps ||
            r.budget.minutes != plan.budget.minutes) {
          continue;
        }
        if (r.train_seconds > 0) s.time.push_back({r.train_seconds, r.val_nats_per_byte});
        const int64_t steps = r.steps.value_or(plan.budget.steps.value_or(0));
        if (steps > 0) s.steps.push_back({static_cast<double>(steps), r.val_nats_per_byte});
        break;
      }
    }
    d.variants.push_back(std::move(s));
  }
  AddStepsComparison(report, curves, d);
  return d;
}

std::string RenderPlotSvg(const PlotData& data) {
  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
      Num(kWidth), "\" height=\"", Num(kHeight), "\" viewBox=\"0 0 ", Num(kWidth), " ",
      Num(kHeight),
      "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text class=\"title\" x=\"",
      Num(kWidth / 2),
      "\" y=\"24\" text-anchor=\"middle\" "
      "font-size=\"15\">",
      Escape(data.title), "</text>\n");
  TimePanel(data, svg);
  StepsPanel(data, svg);
  Legend(data, svg);
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

absl::Status CheckPlotPath(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".svg")) return absl::OkStatus();
  if (absl::EndsWith(lower, ".png")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", path,
        ": PNG needs a rasterizer and fonts, which smallem does not bundle; use .svg (any "
        "browser opens it), then convert if you need a PNG: rsvg-convert -o plot.png plot.svg "
        "(Debian package librsvg2-bin)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write ", path, ": the plot file must end in .svg"));
}

absl::Status WritePlot(const PlotData& data, const std::string& path) {
  if (absl::Status st = CheckPlotPath(path); !st.ok()) return st;
  return WriteFileDurably(path, RenderPlotSvg(data));
}

}  // namespace smallem
