// The whole report from a fixture database: a grid with a reference curve
// submitted to a real SQLite file, every run leased and completed with a
// hand-chosen result, read back as the service reads it, and the report's
// rows checked against hand-computed values (equal steps, equal time, noise).
#include "server/report/full_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/report/experiment_report.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGrid[] = R"(name: article16-fixture
data: data/tiny
base: {layers: 2, heads: 2, embed: 32, context: 32, batch: 4, optimizer: adamw, lr: 0.003}
budget: {steps: 6000}
seeds: [1, 2]
baseline: base
variants:
  base: {}
  muon: {lr: 0.002}
  fast: {layers: 1}
  tiny: {embed: 16}
  late: {lr: 0.004}
reference:
  budgets: {steps: [1500, 3000, 6000, 12000]}
)";

// (variant, seed, steps) → (val nats/byte, training seconds). The reference
// spec is the baseline's, so the curve's 6000-step point is the baseline's
// own two runs. Hand-computed (see tests/server/equal_time_test.cc for
// the derivations): curve (101 s, 1.051), (201 s, 1.001), (402 s, 0.9505),
// (804 s, 0.901), a log-linear fit; τ at equal steps = 0.002
// (t₀.₉₇₅(4)·σ = 0.00196 < floor).
//   variant  mean    Δ steps           t      R(t)      Δ time
//   base     0.9505  —                 402    0.950886  −0.00039  undecided
//   muon     0.9305  −0.0200 (10.0τ)   565    0.926256  +0.00424  worse (1.57τ)
//   fast     0.9555  +0.0050 (2.50τ)   302    0.971583  −0.01608  better (6.39τ)
//   tiny     1.1345  +0.1840 (92.0τ)   81     1.066810  +0.06769  worse (21.8τ),
//                                                       extrapolated ×0.80
//   late     seed 2 still leased: pending
const std::map<std::tuple<std::string, int64_t, int64_t>, std::pair<double, double>>& Results() {
  static const auto* results =
      new std::map<std::tuple<std::string, int64_t, int64_t>, std::pair<double, double>>{
          {{"reference", 1, 1500}, {1.050, 100}},  {{"reference", 2, 1500}, {1.052, 102}},
          {{"reference", 1, 3000}, {1.000, 200}},  {{"reference", 2, 3000}, {1.002, 202}},
          {{"reference", 1, 12000}, {0.900, 800}}, {{"reference", 2, 12000}, {0.902, 808}},
          {{"base", 1, 6000}, {0.950, 400}},       {{"base", 2, 6000}, {0.951, 404}},
          {{"muon", 1, 6000}, {0.930, 560}},       {{"muon", 2, 6000}, {0.931, 570}},
          {{"fast", 1, 6000}, {0.955, 300}},       {{"fast", 2, 6000}, {0.956, 304}},
          {{"tiny", 1, 6000}, {1.134, 80}},        {{"tiny", 2, 6000}, {1.135, 82}},
          {{"late", 1, 6000}, {0.940, 500}}};
  return *results;
}

class FullReportTest : public ::testing::Test {
 protected:
  static constexpr int64_t kNow = 1'700'000'000'000;

  void SetUp() override {
    absl::StatusOr<Grid> grid = ParseGrid(kGrid, "article16-fixture.yaml");
    ASSERT_TRUE(grid.ok()) << grid.status();
    grid_ = *grid;
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);

    SubmissionRecord submission{.name = grid_.name,
                                .baseline = grid_.baseline,
                                .grid_file = "article16-fixture.yaml",
                                .grid_yaml = kGrid,
                                .dataset_hash = "feedbeef",
                                .retry_budget = 2,
                                .cells = {}};
    for (const Cell& cell : grid_.Cells()) {
      submission.cells.push_back(
          CellRecord{.variant = cell.variant,
                     .variant_kind = cell.kind == CellKind::kReference ? "reference" : "variant",
                     .spec_json = cell.spec_json,
                     .spec_hash = cell.spec_hash,
                     .seed = cell.seed,
                     .budget = BudgetKey(cell.budget),
                     .budget_steps = cell.budget.steps,
                     .budget_minutes = cell.budget.minutes});
    }
    absl::StatusOr<SubmitOutcome> outcome = store_->Submit(submission, kNow);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    experiment_id_ = outcome->experiment_id;
    // 5 variants × 2 seeds, then 4 budgets × 2 seeds of which the two at
    // 6000 steps are the baseline's cells.
    ASSERT_EQ(outcome->total, 5 * 2 + 4 * 2 - 2);

    // A worker leases everything; `late` seed 2 is still running.
    while (true) {
      absl::StatusOr<std::optional<LeaseRecord>> lease =
          store_->LeaseNextRun("w1", "cpu", "cpu:2", kNow, kNow + 60'000);
      ASSERT_TRUE(lease.ok()) << lease.status();
      if (!lease->has_value()) break;
      const RunRecord& run = (*lease)->run;
      auto it = Results().find({run.variant, run.seed, run.budget_steps.value_or(0)});
      if (it == Results().end()) continue;  // left leased
      const json result = {{"val_nats_per_byte", it->second.first},
                           {"train_seconds", it->second.second},
                           {"steps", *run.budget_steps},
                           {"params", 1000},
                           {"device_class", "cpu:2"}};
      ASSERT_TRUE(store_->Complete(run.id, run.attempt, "w1", result.dump(), {}, kNow).ok());
    }
  }

  // The runs as the service reads them.
  std::vector<ComparedRun> Runs() {
    absl::StatusOr<std::vector<RunRecord>> runs = store_->ListRuns(experiment_id_);
    absl::StatusOr<std::vector<ResultRecord>> results = store_->ListResults(experiment_id_);
    EXPECT_TRUE(runs.ok() && results.ok());
    std::map<int64_t, ResultRecord> by_run;
    for (const ResultRecord& r : *results) by_run.emplace(r.run_id, r);
    std::vector<ComparedRun> out;
    for (const RunRecord& run : *runs) {
      std::optional<ResultRecord> result;
      if (auto it = by_run.find(run.id); it != by_run.end()) result = it->second;
      absl::StatusOr<ComparedRun> c = ToComparedRun(run, result);
      EXPECT_TRUE(c.ok()) << c.status();
      out.push_back(*c);
    }
    return out;
  }

  std::string Render(CompareAt at, ReportFormat format, std::string plot = "") {
    absl::StatusOr<std::string> text = RenderFullReport(
        ComparisonPlan::ForGrid(grid_), Runs(),
        FullReportOptions{.at = at, .format = format, .noise = true, .plot_path = plot});
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  testing::TempDir dir_;
  Grid grid_;
  std::unique_ptr<SqliteStore> store_;
  int64_t experiment_id_ = 0;
};

const json& RowOf(const json& rows, const std::string& variant) {
  for (const json& row : rows) {
    if (row["variant"] == variant) return row;
  }
  ADD_FAILURE() << "no row " << variant;
  static const json none;
  return none;
}

TEST_F(FullReportTest, PlanFromTheGridSharesTheBaselinesCellsWithTheCurve) {
  const ComparisonPlan plan = ComparisonPlan::ForGrid(grid_);
  ASSERT_TRUE(plan.reference.has_value());
  EXPECT_EQ(plan.reference->shared_variant, "base");
  EXPECT_EQ(plan.reference->budgets.size(), 4u);
  EXPECT_EQ(plan.reference->seeds, (std::vector<int64_t>{1, 2}));
}

TEST_F(FullReportTest, JsonRowsEqualHandComputedValues) {
  const json j = json::parse(Render(CompareAt::kBoth, ReportFormat::kJson));
  EXPECT_EQ(j["comparison"], "equal_steps_and_time");
  EXPECT_EQ(j["device_class"], "cpu:2");
  // Pooled σ over the four two-seed arms (s² = 5e-7 each): σ = 0.00070711,
  // df 4; SE = σ, t₀.₉₇₅(4)·SE = 0.0019632 < floor, so τ = 0.002 per row.
  EXPECT_NEAR(j["noise_model"]["sigma"].get<double>(), std::sqrt(5e-7), 1e-12);
  EXPECT_EQ(j["noise_model"]["df"], 4);
  EXPECT_NEAR(RowOf(j["rows"], "muon")["tau"].get<double>(), 0.002, 1e-12);
  EXPECT_NEAR(RowOf(j["rows"], "muon")["ci_high"].get<double>(),
              -0.0200 + 2.7764451 * std::sqrt(5e-7), 1e-7);

  // Equal steps.
  EXPECT_NEAR(RowOf(j["rows"], "muon")["delta"].get<double>(), -0.0200, 1e-12);
  EXPECT_EQ(RowOf(j["rows"], "muon")["verdict_text"], "better (10.0τ)");
  EXPECT_NEAR(RowOf(j["rows"], "fast")["delta"].get<double>(), 0.0050, 1e-12);
  EXPECT_NEAR(RowOf(j["rows"], "tiny")["delta"].get<double>(), 0.1840, 1e-12);
  EXPECT_EQ(RowOf(j["rows"], "late")["verdict"], "pending");

  // The curve.
  const json& t = j["equal_time"];
  EXPECT_EQ(t["device_class"], "cpu:2");
  ASSERT_EQ(t["reference"].size(), 4u);
  const double seconds[] = {101, 201, 402, 804}, losses[] = {1.051, 1.001, 0.9505, 0.901};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(t["reference"][i]["seconds"].get<double>(), seconds[i], 1e-12);
    EXPECT_NEAR(t["reference"][i]["val_nats_per_byte"].get<double>(), losses[i], 1e-12);
  }

  // Equal time.
  const json& base = RowOf(t["rows"], "base");
  EXPECT_NEAR(base["delta"].get<double>(), 0.9505 - 0.950886, 1e-6);
  // |Δt| is under the floor, but its 90 % interval reaches past −0.002.
  EXPECT_EQ(base["verdict"], "undecided");
  EXPECT_LT(base["tost_low"].get<double>(), -0.002);
  EXPECT_GT(base["missable_effect"].get<double>(), 0.002);
  const json& muon = RowOf(t["rows"], "muon");
  EXPECT_NEAR(muon["mean_train_seconds"].get<double>(), 565, 1e-12);
  // R(t) from the curve the report names (tests/server/equal_time_test.cc).
  EXPECT_EQ(t["curve"]["model"], "fit");
  EXPECT_EQ(t["curve"]["fit"]["form"], "log-linear");
  EXPECT_NEAR(muon["reference_loss"].get<double>(), 0.926256, 1e-6);
  EXPECT_EQ(muon["se_model"].get<double>(), 0);
  EXPECT_NEAR(muon["delta"].get<double>(), 0.9305 - muon["reference_loss"].get<double>(), 1e-12);
  EXPECT_NEAR(muon["tau"].get<double>(),
              muon["t_quantile"].get<double>() * muon["se"].get<double>(), 1e-12);
  EXPECT_EQ(muon["verdict_text"], "worse (1.57τ)");
  const json& fast = RowOf(t["rows"], "fast");
  EXPECT_NEAR(fast["reference_loss"].get<double>(), 0.971583, 1e-6);
  EXPECT_EQ(fast["verdict_text"], "better (6.39τ)");
  EXPECT_EQ(t["curve"]["left_out"].size(), 2u);
  EXPECT_EQ(t["curve"]["bootstrap_resamples"], 200);
  EXPECT_EQ(t["curve"]["time_cv_df"], 7);  // the baseline's pair once
  EXPECT_GT(t["curve"]["time_cv"].get<double>(), 0);
  const json& tiny = RowOf(t["rows"], "tiny");
  EXPECT_TRUE(tiny["extrapolated"].get<bool>());
  EXPECT_NEAR(tiny["span_ratio"].get<double>(), 81.0 / 101.0, 1e-12);
  EXPECT_EQ(tiny["verdict"], "worse");
  EXPECT_EQ(RowOf(t["rows"], "late")["verdict_text"], "pending: 1 of 2 seeds finished, 1 running");

  // Noise: two seeds per arm — spreads, but no Welch t.
  const json& noise = j["noise"];
  EXPECT_NEAR(noise["pooled_sigma"].get<double>(), std::sqrt(5e-7), 1e-12);
  EXPECT_NEAR(RowOf(noise["rows"], "muon")["spread"].get<double>(), 0.001, 1e-12);
  EXPECT_TRUE(RowOf(noise["rows"], "muon")["welch_t"].is_null());
}

TEST_F(FullReportTest, TableShowsStepsAndTimeSideBySide) {
  const std::string text = Render(CompareAt::kBoth, ReportFormat::kTable);
  EXPECT_THAT(text, HasSubstr("article16-fixture — equal steps (6000 steps) and equal time, "
                              "device class cpu:2"));
  EXPECT_THAT(text, HasSubstr("at equal steps"));
  EXPECT_THAT(text, HasSubstr("at equal time"));
  EXPECT_THAT(text, HasSubstr("  1500 steps: 101.0 s, 1.0510 nats/byte (2 seeds)"));
  // A variant can win per step and lose per minute: on one line.
  std::string muon_line;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(text, '\n'))) {
    if (line.rfind("muon ", 0) == 0 && muon_line.empty()) muon_line = line;
  }
  EXPECT_THAT(muon_line, HasSubstr("-0.0200"));
  EXPECT_THAT(muon_line, HasSubstr("better (10.0τ)"));
  EXPECT_THAT(muon_line, HasSubstr("[-0.0220, -0.0180]  0.0020  better (10.0τ)"));
  EXPECT_THAT(muon_line, HasSubstr("0.9263"));
  EXPECT_THAT(muon_line, HasSubstr("+0.0042  [+0.0015, +0.0069]  0.0027  worse (1.57τ)"));
  EXPECT_THAT(text, HasSubstr("1.0668 (extrapolated ×0.80)"));
  EXPECT_THAT(text, HasSubstr("left out: predicted 1.0011, miss -0.0001 (τ 0.0022)"));
  EXPECT_THAT(text, HasSubstr("R(t) = log-linear fit: L(t_ref) = 0.9759, A = 0.0724 per unit of ln t"));
  EXPECT_THAT(text, HasSubstr("tiny: its 81.0 s are 0.80× the shortest reference run's 101.0 s"));
  // The noise section follows.
  EXPECT_THAT(text, HasSubstr("article16-fixture — noise (seed replicates per variant)"));
  EXPECT_THAT(text, HasSubstr("pooled σ = 0.0007 nats/byte (df 4)"));
}

TEST_F(FullReportTest, AtStepsIsTheEqualStepsReportAndAtTimeTheEqualTimeOne) {
  const std::string steps = Render(CompareAt::kSteps, ReportFormat::kTable);
  EXPECT_THAT(steps, HasSubstr("equal steps, 6000 steps"));
  EXPECT_THAT(steps, Not(HasSubstr("R(t)")));
  const std::string time = Render(CompareAt::kTime, ReportFormat::kTable);
  EXPECT_THAT(time, HasSubstr("equal time (variants at 6000 steps)"));
  EXPECT_THAT(time, HasSubstr("R(t)"));
  EXPECT_THAT(time, Not(HasSubstr("Δ steps")));

  const std::string csv = Render(CompareAt::kTime, ReportFormat::kCsv);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[2], HasSubstr("article16-fixture,muon,worse,1.569,2,2,0.930500,565.000,"
                                  "0.926256,0.004244,"));
  // SE_V, SE_R, SE_t, ME
  EXPECT_THAT(lines[2], HasSubstr(",0.000756,0.000635,4.5143,0.000000,"));
}

TEST_F(FullReportTest, CombinedCsvExtendsEachEqualStepsLine) {
  const std::string csv = Render(CompareAt::kBoth, ReportFormat::kCsv);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr(",reference_loss,delta_time,ci_low_time,ci_high_time,tau_time,"
                                  "delta_time_over_tau,verdict_time,extrapolated,span_ratio"));
  EXPECT_THAT(lines[4], HasSubstr("tiny,worse,92.000,"));
  EXPECT_THAT(lines[4], HasSubstr(",1.066810,0.067690,0.064582,0.070798,0.003108,21.779,"
                                  "worse,true,0.8020"));
}

TEST_F(FullReportTest, PlotIsWrittenBesideTheReport) {
  const std::string path = dir_.Join("article16.svg");
  const std::string text = Render(CompareAt::kBoth, ReportFormat::kTable, path);
  EXPECT_THAT(text, HasSubstr("plot written to " + path));
  EXPECT_TRUE(std::filesystem::exists(path));
  // The same figure as text, for a coordinator to send to a remote client.
  absl::StatusOr<std::string> svg = RenderReportPlotSvg(ComparisonPlan::ForGrid(grid_), Runs());
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::ifstream in(path);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(written.str(), *svg);
  EXPECT_THAT(*svg, HasSubstr("data-series=\"variant:muon\""));
  EXPECT_THAT(*svg, HasSubstr("class=\"reference-band\""));
  absl::StatusOr<std::string> png =
      RenderFullReport(ComparisonPlan::ForGrid(grid_), Runs(),
                       FullReportOptions{.at = CompareAt::kBoth,
                                         .format = ReportFormat::kTable,
                                         .noise = true,
                                         .plot_path = dir_.Join("article16.png")});
  ASSERT_FALSE(png.ok());
  EXPECT_THAT(png.status().message(), HasSubstr("use .svg"));
}

TEST_F(FullReportTest, TimingsAcrossDeviceClassesAreRefused) {
  // The curve's own runs came from a GPU; the variants ran on the CPU.
  ComparisonPlan plan = ComparisonPlan::ForGrid(grid_);
  plan.reference->shared_variant = "";
  std::vector<ComparedRun> runs = Runs();
  for (ComparedRun& r : runs) {
    if (r.variant == "reference") r.device_class = "cuda:NVIDIA H200";
  }
  absl::StatusOr<std::string> time = RenderFullReport(
      plan, runs,
      FullReportOptions{
          .at = CompareAt::kTime, .format = ReportFormat::kTable, .noise = true, .plot_path = ""});
  ASSERT_FALSE(time.ok());
  EXPECT_EQ(time.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(time.status().message(),
              HasSubstr("ran on device class cuda:NVIDIA H200 but the variants are compared on "
                        "cpu:2"));
  // The default report still shows equal steps, and says why time is missing.
  absl::StatusOr<std::string> both = RenderFullReport(
      plan, runs,
      FullReportOptions{
          .at = CompareAt::kBoth, .format = ReportFormat::kTable, .noise = false, .plot_path = ""});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, HasSubstr("equal steps, 6000 steps"));
  EXPECT_THAT(*both, HasSubstr("note: equal time not shown: equal-time comparison refused"));
}

TEST_F(FullReportTest, AGridWithoutAReferenceBlockGetsAOneLineNote) {
  ComparisonPlan plan = ComparisonPlan::ForGrid(grid_);
  plan.reference.reset();
  absl::StatusOr<std::string> both = RenderFullReport(
      plan, Runs(),
      FullReportOptions{
          .at = CompareAt::kBoth, .format = ReportFormat::kTable, .noise = false, .plot_path = ""});
  ASSERT_TRUE(both.ok()) << both.status();
  const std::string note = "note: equal steps only: no `reference` block for equal time "
                           "(docs/grid-format.md)\n";
  EXPECT_THAT(*both, HasSubstr(note));
  EXPECT_THAT(*both, Not(HasSubstr("equal time not shown")));
  EXPECT_LE(note.size(), 100u);  // one terminal line
}

TEST_F(FullReportTest, NoiseVerbAndCompareAtNames) {
  absl::StatusOr<std::string> noise =
      RenderNoiseReport(ComparisonPlan::ForGrid(grid_), Runs(), ReportFormat::kCsv);
  ASSERT_TRUE(noise.ok()) << noise.status();
  EXPECT_THAT(*noise, HasSubstr("article16-fixture,muon,2,0.001000,0.000707,1.0000,0.78200,false,,,3,0.000707,4,cpu:2,2,40"));
  EXPECT_EQ(*ParseCompareAt("time"), CompareAt::kTime);
  EXPECT_EQ(*ParseCompareAt("steps"), CompareAt::kSteps);
  EXPECT_EQ(*ParseCompareAt("both"), CompareAt::kBoth);
  EXPECT_THAT(ParseCompareAt("minutes").status().message(), HasSubstr("expected steps, time"));
}

TEST(Article16ExampleTest, ItsReferenceCurveRunsThroughTheBaseline) {
  std::ifstream in(std::string(SMALLEM_SOURCE_DIR) + "/examples/article16.yaml");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Grid> grid = ParseGrid(text.str(), "examples/article16.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const ComparisonPlan plan = ComparisonPlan::ForGrid(*grid);
  ASSERT_TRUE(plan.reference.has_value());
  EXPECT_EQ(plan.reference->budgets.size(), 4u);
  EXPECT_EQ(plan.reference->shared_variant, "adamw");
  EXPECT_NE(grid->FindVariant("muon-short"), nullptr);
  // 7 variants × 2 seeds, then 4 budgets × 2 seeds less the baseline's 2.
  EXPECT_EQ(grid->Cells().size(), 7u * 2 + 4 * 2 - 2);
}

}  // namespace
}  // namespace smallem
