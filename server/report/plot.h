// Plot: the figure of an equal-time study as a self-contained SVG file,
// written by hand (no plotting library, no fonts beyond the viewer's).
//
// Two panels side by side:
//  1. validation loss (nats/byte) against training time, log-scaled x: the
//     reference curve's points (mean of each budget's seeds), R(t) as the
//     comparison uses it (the chosen model, server/analysis/curve_choice.h;
//     solid between the points, dashed where it is extrapolated to cover the
//     variants' times), its band R(t) ± t₀.₉₇₅·SE_R(t) (bootstrap), and
//     every seed of every variant as a marker, one colour per variant;
//  2. loss against optimizer steps: each variant's training curve (the
//     mean of its seeds' progress points, from the store: the only loss
//     recorded during training, converted to nats/byte at the validation
//     text's bytes per token), its seeds' final validation losses as
//     markers, the reference seeds, and at the budget each variant's Δ
//     with its 95 % interval (equal steps) drawn against the baseline's
//     mean and listed in the panel's corner. The x axis is log-scaled when
//     the steps span a factor of 3 or more (curves, reference budgets), and
//     linear from 0 otherwise (final points alone, all at one budget).
//
// The SVG is meant to be read by programs too: each panel is a
// <g class="panel" id="time-panel"|"steps-panel">; each series is a
// <g class="series" data-series="NAME"> ("reference", "variant:NAME"); the
// curve is <polyline class="reference-line"> (and
// "reference-extrapolated"), the band <polygon class="reference-band">; every
// marker has a <title> with its values. In the steps panel a variant's
// training curve is <polyline class="training-curve"> inside its series,
// its interval <g class="delta" data-delta="variant:NAME"> holding
// <line class="delta-interval"> (the 95 % interval of its mean,
// baseline mean + Δ's interval) and <line class="delta-mean">; the
// baseline's mean is <line class="baseline-mean">.
//
// PNG is not produced: that needs a rasterizer and fonts, which Smallem does
// not bundle. WritePlot refuses a .png path and says how to convert the SVG
// (e.g. `rsvg-convert -o plot.png plot.svg`, Debian package librsvg2-bin).
//
// Thread-safety: pure functions, except WritePlot, which writes one file.
#ifndef SMALLEM_SERVER_REPORT_PLOT_H_
#define SMALLEM_SERVER_REPORT_PLOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/analysis/curve_choice.h"
#include "server/analysis/reference_runs.h"
#include "server/analysis/equal_time.h"

namespace smallem {

struct PlotPoint {
  double x = 0;  // seconds or steps
  double y = 0;  // val nats/byte
};

struct PlotSeries {
  std::string name;              // a variant's name
  std::vector<PlotPoint> time;   // (training seconds, loss) per seed
  std::vector<PlotPoint> steps;  // (optimizer steps, loss) per seed; steps > 0 only
  // (optimizer step, training loss in nats/byte): the mean over the
  // variant's seeds at the steps every one of their curves has; empty
  // without curves.
  std::vector<PlotPoint> training;
  // At equal steps: the variant's mean and Δ with its 95 % interval,
  // set on compared rows (not the baseline's); the verdict's text.
  std::optional<double> delta, ci_low, ci_high;
  std::string verdict;
};

// One run's training curve (its progress points, every attempt's, a later
// attempt's point replacing an earlier one's at the same step), for the
// steps panel.
struct TrainingCurve {
  std::string variant;
  int64_t seed = 0;
  std::string device_class;
  std::vector<PlotPoint> points;  // (optimizer step, training loss in nats/byte), by step
};

struct PlotData {
  std::string title;
  std::optional<TimeCurve> curve;           // the reference curve (≥ 2 points), if any
  std::vector<PlotPoint> reference_points;  // (seconds, loss) of the curve's points
  std::vector<PlotPoint> reference_steps;   // (steps, loss) per reference seed
  // The band R(t) ± band_t·SE_R(t); none without a bootstrap or band_t.
  std::optional<CurveBootstrap> bootstrap;
  double band_t = 0;
  std::vector<PlotSeries> variants;
  // The equal-steps budget and the baseline's mean there, where the
  // variants' intervals are drawn; unset for a minutes budget or before
  // the baseline finished.
  std::optional<double> budget_steps;
  std::optional<double> baseline_mean;
};

// The data of `report`: its chosen curve and bootstrap when it has two
// points or more, every finished seed of every row, each row's Δ at equal
// steps, and the variants' training curves from `curves` (the runs at the
// compared budget: those on the compared device class are used).
PlotData PlotDataFor(const TimeReport& report, const std::vector<TrainingCurve>& curves = {});
// Without a reference curve: the variants of an equal-steps report (their
// seeds' losses and mean times; per-seed steps from `runs`), Δ and curves
// as above.
PlotData PlotDataFor(const Report& report, const ComparisonPlan& plan,
                     const std::vector<ComparedRun>& runs,
                     const std::vector<TrainingCurve>& curves = {});

// The figure as an SVG document.
std::string RenderPlotSvg(const PlotData& data);

// OK when `path` ends in .svg (any case); InvalidArgument for .png (saying
// how to convert an SVG) or any other extension. For a client that writes
// the file itself, to refuse before asking a coordinator for the figure.
absl::Status CheckPlotPath(const std::string& path);

// Writes the figure to `path` (CheckPlotPath first), through a temporary file
// renamed into place; the file system's error otherwise.
absl::Status WritePlot(const PlotData& data, const std::string& path);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_PLOT_H_
