// The figure: rendered, parsed back as XML, and checked series by series.
#include "server/report/plot.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/compared_runs.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MakeRun;
using testing::Steps;

// ---- A small XML reader: enough for the SVG we write --------------------

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::vector<std::unique_ptr<Element>> children;
  std::string text;  // character data directly inside, entities decoded

  std::string Attr(const std::string& key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? "" : it->second;
  }
  // Every descendant (and itself) for which `match` holds, in document order.
  template <typename F>
  void Find(F match, std::vector<const Element*>& out) const {
    if (match(*this)) out.push_back(this);
    for (const auto& c : children) c->Find(match, out);
  }
};

std::string Decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t end = s.find(';', i);
    const std::string entity = s.substr(i + 1, end - i - 1);
    static const std::map<std::string, char> kEntities = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    auto it = kEntities.find(entity);
    if (it == kEntities.end()) throw std::runtime_error("unknown entity &" + entity + ";");
    out += it->second;
    i = end;
  }
  return out;
}

// Throws on anything malformed: unbalanced tags, a bare '&' or '<', a
// missing quote.
std::unique_ptr<Element> ParseXml(const std::string& xml) {
  size_t pos = 0;
  if (xml.compare(0, 5, "<?xml") == 0) pos = xml.find("?>") + 2;
  std::vector<Element*> stack;
  std::unique_ptr<Element> root;
  while (pos < xml.size()) {
    const size_t lt = xml.find('<', pos);
    const std::string text =
        xml.substr(pos, lt == std::string::npos ? std::string::npos : lt - pos);
    if (!stack.empty())
      stack.back()->text += Decode(text);
    else if (text.find_first_not_of(" \n\t") != std::string::npos)
      throw std::runtime_error("text outside the root");
    if (lt == std::string::npos) break;
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) throw std::runtime_error("unclosed tag");
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    pos = gt + 1;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back()->name != tag.substr(1)) {
        throw std::runtime_error("mismatched </" + tag.substr(1) + ">");
      }
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    auto element = std::make_unique<Element>();
    size_t i = tag.find_first_of(" \n");
    element->name = tag.substr(0, i);
    while (i != std::string::npos && i < tag.size()) {
      i = tag.find_first_not_of(" \n", i);
      if (i == std::string::npos) break;
      const size_t eq = tag.find('=', i);
      if (eq == std::string::npos || tag[eq + 1] != '"')
        throw std::runtime_error("bad attribute in <" + tag + ">");
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) throw std::runtime_error("unterminated attribute");
      const std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos) throw std::runtime_error("'<' in an attribute");
      element->attributes[tag.substr(i, eq - i)] = Decode(value);
      i = close + 1;
    }
    Element* raw = element.get();
    if (stack.empty()) {
      if (root) throw std::runtime_error("two roots");
      root = std::move(element);
    } else {
      stack.back()->children.push_back(std::move(element));
    }
    if (!self_closing) stack.push_back(raw);
  }
  if (!stack.empty()) throw std::runtime_error("unclosed <" + stack.back()->name + ">");
  if (!root) throw std::runtime_error("no root");
  return root;
}

std::vector<std::pair<double, double>> PointsOf(const Element& e) {
  std::vector<std::pair<double, double>> out;
  const std::vector<std::string> pairs = absl::StrSplit(e.Attr("points"), ' ', absl::SkipEmpty());
  for (const std::string& pair : pairs) {
    std::vector<std::string> xy = absl::StrSplit(pair, ',');
    out.emplace_back(std::stod(xy.at(0)), std::stod(xy.at(1)));
  }
  return out;
}

// ---- The data ------------------------------------------------------------


ComparedRun Finished(const std::string& variant, int64_t seed, int64_t steps, double loss,
                     double seconds) {
  return MakeRun(variant, seed, steps, RunState::kSucceeded, loss, seconds, "cpu", 1000);
}

// Reference at 1500/3000/6000/12000 steps (101, 201, 402, 804 s); the
// variant "a<b&c" is faster than the whole curve (extrapolated below it).
TimeReport Fixture() {
  ComparisonPlan plan;
  plan.experiment = "plot";
  plan.baseline = "base";
  plan.variants = {"base", "muon", "a<b&c"};
  plan.seeds = {1, 2};
  plan.budget = Steps(6000);
  plan.reference = ReferencePlan{.budgets = {Steps(1500), Steps(3000), Steps(6000), Steps(12000)},
                                 .seeds = {1, 2},
                                 .shared_variant = "base"};
  std::vector<ComparedRun> runs = {
      Finished("reference", 1, 1500, 1.100, 100),  Finished("reference", 2, 1500, 1.102, 102),
      Finished("reference", 1, 3000, 1.000, 200),  Finished("reference", 2, 3000, 1.002, 202),
      Finished("reference", 1, 12000, 0.900, 800), Finished("reference", 2, 12000, 0.902, 808),
      Finished("base", 1, 6000, 0.950, 400),       Finished("base", 2, 6000, 0.951, 404),
      Finished("muon", 1, 6000, 0.930, 560),       Finished("muon", 2, 6000, 0.931, 570),
      Finished("a<b&c", 1, 6000, 1.134, 80),       Finished("a<b&c", 2, 6000, 1.135, 82)};
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

const Element* Only(const Element& root, const std::string& name, const std::string& key,
                    const std::string& value) {
  std::vector<const Element*> found;
  root.Find([&](const Element& e) { return e.name == name && e.Attr(key) == value; }, found);
  EXPECT_EQ(found.size(), 1u) << name << " " << key << "=" << value;
  return found.empty() ? nullptr : found[0];
}

size_t Count(const Element& root, const std::string& name) {
  std::vector<const Element*> found;
  root.Find([&](const Element& e) { return e.name == name; }, found);
  return found.size();
}

TEST(PlotTest, TimePanelHasTheCurveItsBandAndEverySeed) {
  const std::string svg = RenderPlotSvg(PlotDataFor(Fixture()));
  std::unique_ptr<Element> root;
  ASSERT_NO_THROW(root = ParseXml(svg)) << svg;
  EXPECT_EQ(root->name, "svg");
  const Element* panel = Only(*root, "g", "id", "time-panel");
  ASSERT_NE(panel, nullptr);

  // The reference points: four squares, and R(t) through them sampled in log
  // time (48 steps over the drawn span, plus the points, inside the span),
  // left to right; a lower loss is drawn lower on screen (larger y).
  const Element* reference = Only(*panel, "g", "data-series", "reference");
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(Count(*reference, "rect"), 4u);
  const Element* line = Only(*panel, "polyline", "class", "reference-line");
  ASSERT_NE(line, nullptr);
  const auto points = PointsOf(*line);
  ASSERT_GT(points.size(), 4u);
  for (size_t i = 1; i < points.size(); ++i) {
    EXPECT_GE(points[i].first, points[i - 1].first);
    EXPECT_GE(points[i].second, points[i - 1].second - 0.05);  // the loss falls
  }
  // The line passes through the squares (the curve is exact at the points).
  std::vector<const Element*> squares;
  reference->Find([](const Element& e) { return e.name == "rect"; }, squares);
  ASSERT_FALSE(squares.empty());
  EXPECT_NEAR(points.front().first, std::stod(squares.front()->Attr("x")) + 3.5, 0.11);

  // The variant below the curve's span makes the line extrapolated there.
  const Element* extrapolated = Only(*panel, "polyline", "class", "reference-extrapolated");
  ASSERT_NE(extrapolated, nullptr);
  EXPECT_LT(PointsOf(*extrapolated)[0].first, points[0].first);

  // The band R(t) ± t·SE_R(t) surrounds the line: upper edge, then lower
  // edge back, one vertex each per sample.
  const Element* band = Only(*panel, "polygon", "class", "reference-band");
  ASSERT_NE(band, nullptr);
  const auto band_points = PointsOf(*band);
  ASSERT_EQ(band_points.size() % 2, 0u);
  const size_t half = band_points.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const auto& upper = band_points[i];
    const auto& lower = band_points[band_points.size() - 1 - i];
    EXPECT_NEAR(upper.first, lower.first, 0.11);
    EXPECT_LE(upper.second, lower.second);  // upper = R + t·SE_R, drawn higher
  }
  EXPECT_THAT(band->children.at(0)->text, HasSubstr("R(t) ± t·SE_R(t)"));

  // Every seed of every variant, names escaped and read back intact.
  for (const std::string& name : {"base", "muon", "a<b&c"}) {
    const Element* series = Only(*panel, "g", "data-series", "variant:" + name);
    ASSERT_NE(series, nullptr);
    EXPECT_EQ(Count(*series, "circle"), 2u) << name;
  }
  const Element* muon = Only(*panel, "g", "data-series", "variant:muon");
  EXPECT_THAT(muon->children.at(0)->children.at(0)->text, HasSubstr("muon: 9.33 min, 0.9300"));
}

TEST(PlotTest, StepsPanelHasEveryReferenceSeedAndVariant) {
  const std::string svg = RenderPlotSvg(PlotDataFor(Fixture()));
  std::unique_ptr<Element> root = ParseXml(svg);
  const Element* panel = Only(*root, "g", "id", "steps-panel");
  ASSERT_NE(panel, nullptr);
  const Element* reference = Only(*panel, "g", "data-series", "reference");
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(Count(*reference, "rect"), 8u);  // 4 budgets × 2 seeds
  EXPECT_EQ(PointsOf(*Only(*panel, "polyline", "class", "reference-line")).size(), 4u);
  for (const std::string& name : {"base", "muon", "a<b&c"}) {
    const Element* series = Only(*panel, "g", "data-series", "variant:" + name);
    ASSERT_NE(series, nullptr);
    EXPECT_EQ(Count(*series, "circle"), 2u) << name;
  }
  // Axis titles and the legend say what is drawn.
  EXPECT_THAT(svg, HasSubstr("training time (log scale)"));
  EXPECT_THAT(svg, HasSubstr("optimizer steps (log scale)"));
  EXPECT_THAT(svg, HasSubstr("validation loss (nats/byte)"));
  EXPECT_THAT(svg, HasSubstr("a&lt;b&amp;c"));
}

TEST(PlotTest, WithoutAReferenceCurveTheVariantsAreStillDrawn) {
  ComparisonPlan plan;
  plan.experiment = "steps-only";
  plan.baseline = "base";
  plan.variants = {"base", "rope"};
  plan.seeds = {1};
  plan.budget = Steps(300);
  std::vector<ComparedRun> runs = {Finished("base", 1, 300, 1.5, 12),
                                   Finished("rope", 1, 300, 1.49, 13)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  ASSERT_TRUE(report.ok());
  std::unique_ptr<Element> root = ParseXml(RenderPlotSvg(PlotDataFor(*report, plan, runs)));
  std::vector<const Element*> lines;
  root->Find([](const Element& e) { return e.name == "polyline"; }, lines);
  EXPECT_TRUE(lines.empty());
  for (const char* id : {"time-panel", "steps-panel"}) {
    const Element* panel = Only(*root, "g", "id", id);
    ASSERT_NE(panel, nullptr);
    EXPECT_EQ(Count(*Only(*panel, "g", "data-series", "variant:rope"), "circle"), 1u) << id;
  }
}

// The x positions of a panel's axis ticks, and where its frame spans.
struct XAxis {
  double left = 0, right = 0;
  std::vector<double> ticks;
  std::vector<std::string> labels;
};

XAxis XAxisOf(const Element& panel) {
  XAxis axis;
  std::vector<const Element*> found;
  panel.Find([](const Element& e) { return e.name == "rect" && e.Attr("class") == "frame"; },
             found);
  if (found.empty()) return axis;
  axis.left = std::stod(found[0]->Attr("x"));
  axis.right = axis.left + std::stod(found[0]->Attr("width"));
  found.clear();
  panel.Find([](const Element& e) { return e.name == "line" && e.Attr("class") == "tick"; },
             found);
  for (const Element* e : found) axis.ticks.push_back(std::stod(e->Attr("x1")));
  found.clear();
  panel.Find([](const Element& e) {
    return e.name == "text" && e.Attr("class") == "tick-label" && e.Attr("text-anchor") == "middle";
  }, found);
  for (const Element* e : found) axis.labels.push_back(e->text);
  return axis;
}

// Ticks inside the frame, three or more, with one near every drawn point.
void ExpectTicksReachEveryPoint(const Element& root, const std::string& id) {
  const Element* panel = Only(root, "g", "id", id);
  ASSERT_NE(panel, nullptr);
  const XAxis axis = XAxisOf(*panel);
  ASSERT_GE(axis.ticks.size(), 3u) << id << ": " << absl::StrJoin(axis.labels, ", ");
  for (double x : axis.ticks) {
    EXPECT_GE(x, axis.left) << id;
    EXPECT_LE(x, axis.right) << id;
  }
  std::vector<const Element*> circles;
  panel->Find([](const Element& e) { return e.name == "circle"; }, circles);
  ASSERT_FALSE(circles.empty());
  for (const Element* c : circles) {
    const double cx = std::stod(c->Attr("cx"));
    double nearest = 1e9;
    for (double x : axis.ticks) nearest = std::min(nearest, std::abs(x - cx));
    EXPECT_LE(nearest, (axis.right - axis.left) / 3)
        << id << ": a point at x " << cx << " is far from every tick ("
        << absl::StrJoin(axis.labels, ", ") << ")";
  }
}

// Two arms of two seeds at 300 steps, each run with its training curve
// (progress every 10 steps, falling from 2.4 to its final loss).
struct StepsOnly {
  ComparisonPlan plan;
  std::vector<ComparedRun> runs;
  std::vector<TrainingCurve> curves;
};

StepsOnly StepsOnlyFixture() {
  StepsOnly f;
  f.plan.experiment = "steps-only";
  f.plan.baseline = "base";
  f.plan.variants = {"base", "rope"};
  f.plan.seeds = {1, 2};
  f.plan.budget = Steps(300);
  const std::map<std::pair<std::string, int64_t>, double> finals = {
      {{"base", 1}, 1.60}, {{"base", 2}, 1.62}, {{"rope", 1}, 1.50}, {{"rope", 2}, 1.51}};
  for (const auto& [cell, loss] : finals) {
    f.runs.push_back(Finished(cell.first, cell.second, 300, loss, 12));
    TrainingCurve c{.variant = cell.first, .seed = cell.second, .device_class = "cpu",
                    .points = {}};
    for (int step = 10; step <= 300; step += 10) {
      c.points.push_back({static_cast<double>(step), loss + 0.8 * std::pow(10.0 / step, 0.5)});
    }
    f.curves.push_back(std::move(c));
  }
  return f;
}

TEST(PlotTest, StepsPanelDrawsEachArmsTrainingCurveAndItsDeltaAtTheBudget) {
  const StepsOnly f = StepsOnlyFixture();
  absl::StatusOr<Report> report = CompareAtEqualSteps(f.plan, f.runs);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->rows[1].delta.has_value());
  const std::string svg = RenderPlotSvg(PlotDataFor(*report, f.plan, f.runs, f.curves));
  std::unique_ptr<Element> root = ParseXml(svg);
  const Element* panel = Only(*root, "g", "id", "steps-panel");
  ASSERT_NE(panel, nullptr);

  // One curve per arm, inside its series, left to right over the steps.
  for (const std::string& name : {"base", "rope"}) {
    const Element* series = Only(*panel, "g", "data-series", "variant:" + name);
    ASSERT_NE(series, nullptr);
    const Element* curve = Only(*series, "polyline", "class", "training-curve");
    ASSERT_NE(curve, nullptr) << name;
    const auto points = PointsOf(*curve);
    EXPECT_EQ(points.size(), 30u) << name;  // every step both seeds have
    for (size_t i = 1; i < points.size(); ++i) {
      EXPECT_GT(points[i].first, points[i - 1].first) << name;
      EXPECT_GE(points[i].second, points[i - 1].second) << name;  // the loss falls: y grows
    }
    EXPECT_EQ(Count(*series, "circle"), 2u) << name;
  }
  // The steps span 10–300: a log axis, ticked across the data.
  EXPECT_THAT(svg, HasSubstr("optimizer steps (log scale)"));
  ExpectTicksReachEveryPoint(*root, "steps-panel");

  // rope's Δ with its interval at the budget: the bar spans its mean's 95 %
  // interval (higher loss drawn lower), its mark sits on the seeds' mean,
  // and the corner lists Δ, the interval and the verdict.
  const ReportRow& rope = report->rows[1];
  const Element* delta = Only(*panel, "g", "data-delta", "variant:rope");
  ASSERT_NE(delta, nullptr);
  const Element* bar = Only(*delta, "line", "class", "delta-interval");
  const Element* mark = Only(*delta, "line", "class", "delta-mean");
  ASSERT_NE(bar, nullptr);
  ASSERT_NE(mark, nullptr);
  const double y_high = std::stod(bar->Attr("y1")), y_low = std::stod(bar->Attr("y2"));
  const double y_mean = std::stod(mark->Attr("y1"));
  EXPECT_LT(y_high, y_mean);
  EXPECT_LT(y_mean, y_low);
  std::vector<const Element*> rope_seeds;
  Only(*panel, "g", "data-series", "variant:rope")
      ->Find([](const Element& e) { return e.name == "circle"; }, rope_seeds);
  ASSERT_EQ(rope_seeds.size(), 2u);
  EXPECT_NEAR(y_mean,
              (std::stod(rope_seeds[0]->Attr("cy")) + std::stod(rope_seeds[1]->Attr("cy"))) / 2,
              0.11);
  // The interval's length in pixels is its length in loss at the panel's scale.
  const double px_per_loss = (y_low - y_mean) / (*rope.delta - *rope.ci_low);
  EXPECT_NEAR((y_low - y_high) / px_per_loss, *rope.ci_high - *rope.ci_low, 1e-3);
  EXPECT_THAT(bar->children.at(0)->text, HasSubstr("95 % interval"));
  EXPECT_THAT(svg, HasSubstr(absl::StrFormat("rope %+.4f [%+.4f, %+.4f] %s", *rope.delta,
                                             *rope.ci_low, *rope.ci_high,
                                             VerdictName(rope.verdict))));
  // The baseline has no interval of its own: its mean is the dashed mark.
  std::vector<const Element*> intervals;
  panel->Find([](const Element& e) { return e.Attr("class") == "delta"; }, intervals);
  EXPECT_EQ(intervals.size(), 1u);
  EXPECT_NE(Only(*panel, "line", "class", "baseline-mean"), nullptr);
}

TEST(PlotTest, FinalPointsAloneAtOneBudgetGetALinearAxisFromZero) {
  // Without curves every point is at the budget: a "log scale" across
  // 280–320 steps said nothing; the axis starts at 0 and reaches past it.
  const StepsOnly f = StepsOnlyFixture();
  absl::StatusOr<Report> report = CompareAtEqualSteps(f.plan, f.runs);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string svg = RenderPlotSvg(PlotDataFor(*report, f.plan, f.runs));
  std::unique_ptr<Element> root = ParseXml(svg);
  const Element* panel = Only(*root, "g", "id", "steps-panel");
  ASSERT_NE(panel, nullptr);
  EXPECT_THAT(svg, Not(HasSubstr("optimizer steps (log scale)")));
  const XAxis axis = XAxisOf(*panel);
  ASSERT_GE(axis.labels.size(), 3u);
  EXPECT_EQ(axis.labels.front(), "0");
  EXPECT_EQ(axis.labels.back(), "300");
  std::vector<const Element*> circles;
  panel->Find([](const Element& e) { return e.name == "circle"; }, circles);
  ASSERT_EQ(circles.size(), 4u);
  for (const Element* c : circles) {
    EXPECT_GE(std::stod(c->Attr("cx")), axis.ticks.front());
    EXPECT_LE(std::stod(c->Attr("cx")), axis.ticks.back() + 0.11);
  }
  // Δ and its interval are drawn without curves too.
  EXPECT_NE(Only(*panel, "g", "data-delta", "variant:rope"), nullptr);
}

TEST(PlotTest, TicksReachTheDataOnANarrowRange) {
  PlotData narrow;
  narrow.variants = {{.name = "base",
                      .time = {{35, 1.2}, {45, 1.1}},
                      .steps = {{1500, 1.2}, {1500, 1.1}}}};
  std::unique_ptr<Element> root = ParseXml(RenderPlotSvg(narrow));
  ExpectTicksReachEveryPoint(*root, "time-panel");
  ExpectTicksReachEveryPoint(*root, "steps-panel");

  PlotData spread;  // within one decade, but wider than 1-2-5 can cover
  spread.variants = {{.name = "base",
                      .time = {{40, 1.2}, {90, 1.1}},
                      .steps = {{700, 1.2}, {1500, 1.1}}}};
  root = ParseXml(RenderPlotSvg(spread));
  ExpectTicksReachEveryPoint(*root, "time-panel");
  ExpectTicksReachEveryPoint(*root, "steps-panel");
}

TEST(PlotTest, XTickLabelsDoNotRunIntoEachOther) {
  // 0.6–3.5 s: 1-2-5 leaves two ticks, so every 1–9 per decade is ticked,
  // and 0.8 s, 0.9 s, 1 s crowd together.
  PlotData wide;
  wide.variants = {{.name = "base",
                    .time = {{0.6, 1.2}, {3.5, 1.1}},
                    .steps = {{600, 1.2}, {3500, 1.1}}}};
  std::unique_ptr<Element> root = ParseXml(RenderPlotSvg(wide));
  for (const char* id : {"time-panel", "steps-panel"}) {
    const Element* panel = Only(*root, "g", "id", id);
    ASSERT_NE(panel, nullptr);
    std::vector<const Element*> labels;
    panel->Find([](const Element& e) {
      return e.name == "text" && e.Attr("class") == "tick-label" &&
             e.Attr("text-anchor") == "middle";
    }, labels);
    ASSERT_GE(labels.size(), 2u) << id;
    // At 12 px, no label character is wider than 7.5 px.
    for (size_t i = 1; i < labels.size(); ++i) {
      const double gap = std::stod(labels[i]->Attr("x")) - std::stod(labels[i - 1]->Attr("x"));
      const double halves = 7.5 * (labels[i]->text.size() + labels[i - 1]->text.size()) / 2;
      EXPECT_GT(gap, halves) << id << ": \"" << labels[i - 1]->text << "\" runs into \""
                             << labels[i]->text << "\"";
    }
    ExpectTicksReachEveryPoint(*root, id);
  }
}

TEST(PlotTest, WritePlotWritesSvgAndRefusesPng) {
  testing::TempDir dir;
  const PlotData data = PlotDataFor(Fixture());
  ASSERT_TRUE(WritePlot(data, dir.Join("plot.svg")).ok());
  std::ifstream in(dir.Join("plot.svg"));
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), RenderPlotSvg(data));

  absl::Status png = WritePlot(data, dir.Join("plot.png"));
  EXPECT_EQ(png.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(png.message(), HasSubstr("use .svg"));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("plot.png")));
  EXPECT_EQ(WritePlot(data, dir.Join("plot.pdf")).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace smallem
