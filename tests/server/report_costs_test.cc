// What a run costs, in every report: the cache bytes per token (the first
// finished run's), training and generation tokens/s (the mean of the runs
// that measured them), read from the result JSON, beside the parameters and
// their warning.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/analysis/equal_steps.h"
#include "server/report/experiment_report.h"
#include "server/queue/result_schema.h"
#include "server/report/report_format.h"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;

ComparedRun Costly(const std::string& variant, int64_t seed, double loss, int64_t params,
                   int64_t cache, double train, std::optional<double> generation) {
  ComparedRun r = MakeRun(variant, seed, 300, RunState::kSucceeded, loss, 12.5, "cpu", params);
  r.kv_cache_bytes_per_token = cache;
  r.tokens_per_s = train;
  r.generation_tokens_per_s = generation;
  return r;
}

Report CacheReport() {
  ComparisonPlan plan;
  plan.experiment = "cache";
  plan.baseline = "mha";
  plan.variants = {"mha", "own_keys"};
  plan.seeds = {1, 2};
  plan.budget.steps = 300;
  std::vector<ComparedRun> runs = {
      Costly("mha", 1, 1.500, 120'000, 4096, 1000, 50), Costly("mha", 2, 1.501, 120'000, 4096, 1200, 70),
      Costly("own_keys", 1, 1.504, 110'000, 2048, 1100, std::nullopt),
      Costly("own_keys", 2, 1.505, 110'000, 2048, 1300, 80)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

TEST(ReportCostsTest, RowsCarryCacheAndThroughputs) {
  const Report r = CacheReport();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].kv_cache_bytes_per_token, 4096);
  EXPECT_DOUBLE_EQ(*r.rows[0].mean_tokens_per_s, 1100);
  EXPECT_DOUBLE_EQ(*r.rows[0].mean_generation_tokens_per_s, 60);
  EXPECT_EQ(r.rows[1].kv_cache_bytes_per_token, 2048);
  EXPECT_DOUBLE_EQ(*r.rows[1].mean_tokens_per_s, 1200);
  // Only the run that measured it counts.
  EXPECT_DOUBLE_EQ(*r.rows[1].mean_generation_tokens_per_s, 80);
  // The parameter warning stays: −8.3 % is past 2 %.
  EXPECT_TRUE(r.rows[1].params_warning);
}

TEST(ReportCostsTest, EveryFormatShowsThem) {
  const Report r = CacheReport();
  const std::string table = FormatReportTable(r);
  EXPECT_THAT(table, HasSubstr("KV B/token"));
  EXPECT_THAT(table, HasSubstr("gen tok/s"));
  EXPECT_THAT(table, HasSubstr("2,048"));
  EXPECT_THAT(table, HasSubstr("80.0"));
  EXPECT_THAT(FormatReportMarkdown(r), HasSubstr("| train tok/s | gen tok/s |"));
  EXPECT_THAT(FormatReportCsv(r), HasSubstr(",2048,1200.0,80.00\n"));
  const nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["rows"][1]["kv_cache_bytes_per_token"], 2048);
  EXPECT_EQ(j["rows"][0]["mean_generation_tokens_per_s"], 60.0);
}

TEST(ReportCostsTest, ResultsWithoutThemLeaveThemUnset) {
  RunRecord run;
  run.id = 1;
  run.variant = "mha";
  run.status = RunStatus::kSucceeded;
  ResultRecord result;
  result.result_json = R"({"val_nats_per_byte": 1.5, "params": 10})";
  absl::StatusOr<ComparedRun> old = ToComparedRun(run, result);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->kv_cache_bytes_per_token.has_value());
  EXPECT_FALSE(old->generation_tokens_per_s.has_value());
  result.result_json = R"({"val_nats_per_byte": 1.5, "kv_cache_bytes_per_token": 512,
                           "tokens_per_s": 900.5, "generation_tokens_per_s": 41.5})";
  absl::StatusOr<ComparedRun> now = ToComparedRun(run, result);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->kv_cache_bytes_per_token, 512);
  EXPECT_EQ(now->tokens_per_s, 900.5);
  EXPECT_EQ(now->generation_tokens_per_s, 41.5);
}

TEST(ReportCostsTest, ACompletedResultMustCarryThemWithTheirTypes) {
  nlohmann::json result = {{"val_nats_per_byte", 1.5}, {"kv_cache_bytes_per_token", 512},
                           {"generation_tokens_per_s", 40.0}};
  EXPECT_TRUE(CheckResultJson(result).ok());
  result["kv_cache_bytes_per_token"] = 1.5;
  EXPECT_THAT(CheckResultJson(result).message(), HasSubstr("kv_cache_bytes_per_token"));
  result["kv_cache_bytes_per_token"] = 512;
  result["generation_tokens_per_s"] = -1.0;
  EXPECT_THAT(CheckResultJson(result).message(), HasSubstr("generation_tokens_per_s"));
}

}  // namespace
}  // namespace smallem
