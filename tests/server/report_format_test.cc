#include "server/report/report_format.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MakeRun;

ComparedRun Finished(const std::string& variant, int64_t seed, double loss, int64_t params) {
  return MakeRun(variant, seed, 300, RunState::kSucceeded, loss, 12.5, "cpu", params);
}

// baseline 1.500/1.501; rope better with 3.4 % fewer parameters;
// "lr=0.001,norm=rms" undecided; "a|b" pending (one seed).
// Three arms of s² = 5e-7: σ = 0.00070711 (df 3); two seeds each: SE = σ,
// τ = t₀.₉₇₅(3)·SE = 3.1824463·0.00070711 = 0.0022504 (above the floor);
// rope Δ = −0.0100 = 4.44τ, 95 % CI [−0.0122504, −0.0077496].
Report DemoReport() {
  ComparisonPlan plan;
  plan.experiment = "demo";
  plan.baseline = "baseline";
  plan.variants = {"baseline", "rope", "lr=0.001,norm=rms", "a|b"};
  plan.seeds = {1, 2};
  plan.budget.steps = 300;
  std::vector<ComparedRun> runs = {
      Finished("baseline", 1, 1.500, 120'000), Finished("baseline", 2, 1.501, 120'000),
      Finished("rope", 1, 1.490, 115'904),     Finished("rope", 2, 1.491, 115'904),
      Finished("lr=0.001,norm=rms", 1, 1.501, 119'936),
      Finished("lr=0.001,norm=rms", 2, 1.502, 119'936),
      Finished("a|b", 1, 1.6, 120'000)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(ReportFormatTest, FormatNamesParse) {
  EXPECT_EQ(*ParseReportFormat("table"), ReportFormat::kTable);
  EXPECT_EQ(*ParseReportFormat("markdown"), ReportFormat::kMarkdown);
  EXPECT_EQ(*ParseReportFormat("csv"), ReportFormat::kCsv);
  EXPECT_EQ(*ParseReportFormat("json"), ReportFormat::kJson);
}

TEST(ReportFormatTest, UnknownFormatNamesTheChoices) {
  absl::StatusOr<ReportFormat> f = ParseReportFormat("xml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr("unknown report format \"xml\" (expected table, markdown, csv or json)"));
}

TEST(ReportFormatTest, TableStatesTheThresholdAndEachVerdict) {
  const std::string table = FormatReportTable(DemoReport());
  EXPECT_THAT(table, HasSubstr("demo — equal steps, 300 steps, device class cpu"));
  EXPECT_THAT(table, HasSubstr("noise: σ = 0.0007 nats/byte pooled over 3 arms (df 3); each "
                               "row's τ = max(floor 0.0020, t₀.₉₇₅·SE)"));
  EXPECT_THAT(table, HasSubstr("[-0.0123, -0.0077]  0.0023  better (4.44τ)"));
  EXPECT_THAT(table, HasSubstr("undecided: effects up to"));
  EXPECT_THAT(table, Not(HasSubstr("within noise")));
  EXPECT_THAT(table, HasSubstr("pending: 1 of 2 seeds finished"));
  EXPECT_THAT(table, HasSubstr("-0.0100"));
  EXPECT_THAT(table, HasSubstr("115,904"));
  EXPECT_THAT(table, HasSubstr("-3.4 % !"));
  EXPECT_THAT(table, HasSubstr("2 variants compared with baseline, 1 pending (lower is "
                               "better; better/worse: |Δ| > the row's τ; equivalent: the 90 % "
                               "interval inside ±0.0020; undecided: neither)."));
  EXPECT_THAT(table, HasSubstr("note: rope has -3.4 % parameters"));
}

TEST(ReportFormatTest, OneVariantIsCountedInTheSingular) {
  ComparisonPlan plan;
  plan.experiment = "one";
  plan.baseline = "baseline";
  plan.variants = {"baseline", "rope"};
  plan.seeds = {1, 2};
  plan.budget.steps = 300;
  absl::StatusOr<Report> report = CompareAtEqualSteps(
      plan, {Finished("baseline", 1, 1.500, 120'000), Finished("baseline", 2, 1.501, 120'000),
             Finished("rope", 1, 1.490, 115'904), Finished("rope", 2, 1.491, 115'904)});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(FormatReportTable(*report), HasSubstr("1 variant compared with baseline (lower"));
}

TEST(ReportFormatTest, TableColumnsAreAligned) {
  const std::string table = FormatReportTable(DemoReport());
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  // Title, noise line, blank, header, four rows.
  ASSERT_GE(lines.size(), 8u);
  const std::string& header = lines[3];
  ASSERT_EQ(header.rfind("variant", 0), 0u) << header;
  // Every right-aligned column ends where its header ends: check "seeds".
  const size_t seeds_end = DisplayWidth(header.substr(0, header.find("seeds") + 5));
  for (int i = 4; i < 8; ++i) {
    const std::string& line = lines[i];
    // The seeds cell ("2/2", "1/2") ends at the same display column.
    const size_t slash = line.find('/');
    ASSERT_NE(slash, std::string::npos) << line;
    EXPECT_EQ(DisplayWidth(line.substr(0, slash + 2)), seeds_end) << line;
  }
}

TEST(ReportFormatTest, MarkdownIsAGithubTable) {
  const std::string md = FormatReportMarkdown(DemoReport());
  EXPECT_THAT(md, HasSubstr("**demo — equal steps, 300 steps, device class cpu**"));
  EXPECT_THAT(md, HasSubstr("| variant | seeds | val nats/byte | Δ | 95 % CI | τ | verdict |"));
  EXPECT_THAT(md, HasSubstr("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"));
  EXPECT_THAT(md, HasSubstr("| rope | 2/2 | 1.4905 | -0.0100 | [-0.0123, -0.0077] | 0.0023 | "
                            "better (4.44τ) | 115,904 |"));
  EXPECT_THAT(md, HasSubstr("| a\\|b |"));  // a pipe in a name does not split the row
  EXPECT_THAT(md, HasSubstr("- rope has -3.4 % parameters"));
}

TEST(ReportFormatTest, CsvHasOneLinePerVariantAndQuotesCommas) {
  const std::string csv = FormatReportCsv(DemoReport());
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "experiment,variant,verdict,delta_over_tau,seeds_finished,seeds_expected,"
            "mean_val_nats_per_byte,delta,se_method,se,df,t_quantile,ci_low,ci_high,tau,params,"
            "params_change,params_warning,mean_train_seconds,device_class,pending_reason,"
            "tost_low,tost_high,missable_effect,seeds_to_decide,"
            "kv_cache_bytes_per_token,mean_tokens_per_s,mean_generation_tokens_per_s");
  EXPECT_EQ(lines[1],
            "demo,baseline,baseline,,2,2,1.500500,,,,,,,,,120000,,false,12.500,cpu,,,,,,,,");
  EXPECT_THAT(lines[2], HasSubstr("demo,rope,better,-4.444,2,2,1.490500,-0.010000,pooled,0.000707,"
                                  "3.000,3.18245,-0.012250,-0.007750,0.002250,115904,-0.03413,"
                                  "true,"));
  EXPECT_THAT(lines[3], HasSubstr("demo,\"lr=0.001,norm=rms\",undecided,"));
  EXPECT_THAT(lines[4], HasSubstr("demo,a|b,pending,,1,2,"));
  EXPECT_THAT(lines[4], HasSubstr(",1 of 2 seeds finished"));
}

TEST(ReportFormatTest, JsonCarriesEveryFactWithNullsForTheAbsent) {
  const nlohmann::json j = nlohmann::json::parse(FormatReport(DemoReport(), ReportFormat::kJson));
  EXPECT_EQ(j["experiment"], "demo");
  EXPECT_EQ(j["comparison"], "equal_steps");
  EXPECT_EQ(j["budget"]["steps"], 300);
  EXPECT_EQ(j["device_class"], "cpu");
  EXPECT_NEAR(j["noise_model"]["sigma"].get<double>(), std::sqrt(5e-7), 1e-12);
  EXPECT_EQ(j["noise_model"]["df"], 3);
  EXPECT_EQ(j["noise_model"]["arms"].size(), 4u);
  EXPECT_EQ(j["complete"], false);
  ASSERT_EQ(j["rows"].size(), 4u);
  const nlohmann::json& rope = j["rows"][1];
  EXPECT_EQ(rope["variant"], "rope");
  EXPECT_EQ(rope["verdict"], "better");
  EXPECT_EQ(rope["verdict_text"], "better (4.44τ)");
  EXPECT_NEAR(rope["delta"].get<double>(), -0.010, 1e-12);
  EXPECT_EQ(rope["se_method"], "pooled");
  EXPECT_NEAR(rope["se"].get<double>(), std::sqrt(5e-7), 1e-12);
  EXPECT_NEAR(rope["tau"].get<double>(), 0.0022504, 1e-7);
  EXPECT_NEAR(rope["ci_low"].get<double>(), -0.0122504, 1e-7);
  EXPECT_NEAR(rope["t_quantile"].get<double>(), 3.1824463, 1e-6);
  EXPECT_EQ(rope["params"], 115904);
  EXPECT_EQ(rope["params_warning"], true);
  EXPECT_EQ(rope["losses"].size(), 2u);
  const nlohmann::json& pending = j["rows"][3];
  EXPECT_TRUE(pending["delta"].is_null());
  EXPECT_TRUE(pending["mean_val_nats_per_byte"].is_null());
  EXPECT_EQ(pending["pending_reason"], "1 of 2 seeds finished");
  EXPECT_TRUE(j["left_out"].is_array());
  EXPECT_EQ(j["notes"].size(), 2u);  // the size warning and the family
  EXPECT_EQ(j["family"]["variants"], 2);
}

TEST(ReportFormatTest, UnmeasuredNoiseIsSaidNotInvented) {
  ComparisonPlan plan;
  plan.experiment = "demo";
  plan.baseline = "baseline";
  plan.variants = {"baseline"};
  plan.seeds = {1, 2};
  plan.budget.steps = 300;
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, {});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string table = FormatReportTable(*report);
  EXPECT_THAT(table, HasSubstr("noise: not measured (no arm has two finished seeds)"));
  EXPECT_THAT(table, Not(HasSubstr("device class")));
  EXPECT_TRUE(nlohmann::json::parse(FormatReport(*report, ReportFormat::kJson))["noise_model"]
                  ["sigma"].is_null());
}

TEST(ReportFormatTest, EveryFormatEndsWithANewline) {
  const Report report = DemoReport();
  for (ReportFormat f : {ReportFormat::kTable, ReportFormat::kMarkdown, ReportFormat::kCsv,
                         ReportFormat::kJson}) {
    const std::string text = FormatReport(report, f);
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
  }
}

}  // namespace
}  // namespace smallem
