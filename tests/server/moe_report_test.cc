// Mixture of experts on the coordinator's side: grid keys (`feed_forward:
// moe` and the MoE keys), the example grids, and the report's size check on
// active parameters.
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/analysis/equal_steps.h"
#include "runspec/grid.h"
#include "tests/server/compared_runs.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;
using testing::Steps;

constexpr char kGrid[] = R"(name: moe
data: ../data/demo
base:
  arch: modern
  layers: 2
  heads: 2
  embed: 64
  context: 64
budget: {steps: 300}
seeds: [1, 2]
baseline: dense
variants:
  dense: {}
  moe: {feed_forward: moe, top_k: 1}
)";

std::string Replace(const std::string& from, const std::string& to) {
  std::string text = kGrid;
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(MoeGridTest, FeedForwardMoeKeepsThePresetActivation) {
  absl::StatusOr<Grid> grid = ParseGrid(kGrid, "moe.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json moe = nlohmann::json::parse(grid->FindVariant("moe")->spec_json);
  EXPECT_EQ(moe["experts"], 8);
  EXPECT_EQ(moe["top_k"], 1);
  EXPECT_EQ(moe["feed_forward"], "swiglu");
  const nlohmann::json dense = nlohmann::json::parse(grid->FindVariant("dense")->spec_json);
  EXPECT_FALSE(dense.contains("experts"));
}

TEST(MoeGridTest, ImpossibleValuesNameTheLineAndKey) {
  absl::StatusOr<Grid> grid = ParseGrid(Replace("top_k: 1", "top_k: 9"), "moe.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_THAT(grid.status().message(), HasSubstr("moe.yaml:14:"));
  EXPECT_THAT(grid.status().message(), HasSubstr("\"top_k\""));
  grid = ParseGrid(Replace("top_k: 1", "balance: even"), "moe.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_THAT(grid.status().message(), HasSubstr("unknown balance \"even\" (expected bias or aux)"));
  grid = ParseGrid(Replace("top_k: 1", "moe_every: 1.5"), "moe.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_THAT(grid.status().message(), HasSubstr("\"moe_every\": expected an integer"));
}

TEST(MoeGridTest, ExampleGridsParse) {
  for (const char* name :
       {"examples/article16-moe-mtp.yaml", "examples/article16-moe-mtp-cpu.yaml"}) {
    std::ifstream in(std::string(SMALLEM_SOURCE_DIR) + "/" + name);
    ASSERT_TRUE(in.good()) << name;
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<Grid> grid = ParseGrid(text.str(), name);
    ASSERT_TRUE(grid.ok()) << grid.status();
    EXPECT_GE(grid->variants.size(), 3u) << name;
    ASSERT_TRUE(grid->reference.has_value()) << name;
  }
}

TEST(MoeReportTest, TheSizeWarningComparesActiveParameters) {
  auto finished = [](const std::string& variant, int64_t seed, int64_t active, int64_t total) {
    ComparedRun r = MakeRun(variant, seed, 300, RunState::kSucceeded, 1.5, 10, "cpu", active);
    r.total_params = total;
    return r;
  };
  ComparisonPlan plan;
  plan.experiment = "moe";
  plan.baseline = "dense";
  plan.variants = {"dense", "moe", "big"};
  plan.seeds = {1, 2};
  plan.budget = Steps(300);
  // moe: 4× the total, +1 % active (no warning); big: +5 % active (warning).
  std::vector<ComparedRun> runs = {
      finished("dense", 1, 1'000'000, 1'000'000), finished("dense", 2, 1'000'000, 1'000'000),
      finished("moe", 1, 1'010'000, 4'000'000),   finished("moe", 2, 1'010'000, 4'000'000),
      finished("big", 1, 1'050'000, 4'200'000),   finished("big", 2, 1'050'000, 4'200'000)};
  absl::StatusOr<Report> report = CompareAtEqualSteps(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const ReportRow& row : report->rows) {
    if (row.variant == "moe") {
      EXPECT_FALSE(row.params_warning);
      EXPECT_EQ(*row.params, 1'010'000);
      EXPECT_EQ(*row.total_params, 4'000'000);
    } else if (row.variant == "big") {
      EXPECT_TRUE(row.params_warning);
    } else {
      EXPECT_FALSE(row.total_params.has_value()) << "a dense row shows one count";
    }
  }
}

}  // namespace
}  // namespace smallem
