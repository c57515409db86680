// The equal-time protocol as a user runs it: `smallemctl run` on a grid with
// a reference block trains the variants and the AdamW reference curve with
// real worker processes; then a coordinator serves the same SQLite file and
// `report --at time --plot`, `report` (both side by side) and `noise` answer
// from it.
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

using testing::RunCtl;
using Output = testing::CtlOutput;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Three reference lengths bracket the variants' 40 steps; the wider variant
// costs more per step, so it lands elsewhere on the time axis.
std::string EqualTimeGrid(const std::string& data) {
  return absl::StrCat(
      "name: et\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4, lr: 0.003}\n"
      "budget: {steps: 40}\nseeds: [1, 2]\nbaseline: base\n"
      "variants:\n  base: {}\n  wide: {embed: 64}\n"
      "reference:\n  optimizer: adamw\n  budgets: {steps: [20, 40, 80]}\n  seeds: [1]\n");
}

class EqualTimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }
  TempDir dir_;
};

TEST_F(EqualTimeTest, RunThenReportAtTimePlotAndNoiseFromTheSameDatabase) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, EqualTimeGrid(data));
  const std::string db = dir_.Join("smallem.db");

  Output run = RunCtl({"run", grid, "--db", db, "--cache", dir_.Join("cache"), "--format",
                       "json", "--threads", "1"});
  ASSERT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  // 2 variants × 2 seeds, plus the curve's 20 and 80 (its 40-step seed-1 cell
  // is the baseline's own and runs once).
  EXPECT_NE(run.out.find("6 runs (6 new"), std::string::npos) << run.out;
  // Timed comparisons: one run at a time, whatever the cores.
  EXPECT_NE(run.out.find("workers: 1 × 1 thread — one run at a time"), std::string::npos)
      << run.out;
  const size_t brace = run.out.find("\n{");
  ASSERT_NE(brace, std::string::npos) << run.out;
  nlohmann::json both = nlohmann::json::parse(run.out.substr(brace + 1), nullptr, false);
  ASSERT_TRUE(both.is_object()) << run.out;
  EXPECT_EQ(both["comparison"], "equal_steps_and_time");
  ASSERT_EQ(both["equal_time"]["reference"].size(), 3u);
  std::vector<int64_t> curve_steps;
  for (const nlohmann::json& point : both["equal_time"]["reference"]) {
    EXPECT_GT(point["seconds"].get<double>(), 0.0);
    curve_steps.push_back(point["budget"]["steps"].get<int64_t>());
  }
  EXPECT_EQ(curve_steps, (std::vector<int64_t>{20, 40, 80}));
  ASSERT_EQ(both["equal_time"]["rows"].size(), 2u);
  for (const nlohmann::json& row : both["equal_time"]["rows"]) {
    EXPECT_TRUE(row["reference_loss"].is_number()) << row.dump();
    EXPECT_NEAR(row["delta"].get<double>(),
                row["mean_val_nats_per_byte"].get<double>() - row["reference_loss"].get<double>(),
                1e-9);
  }

  // A coordinator on the same file answers the service verbs.
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", db});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = coordinator->address;
  const std::string svg = dir_.Join("et.svg");
  Output report = RunCtl({"report", "et", "--at", "time", "--plot", svg, "--format", "json",
                          "--coordinator", address, "--timeout", "5"});
  ASSERT_EQ(report.exit.exit_code, 0) << report.out << "\n" << report.last_error;
  nlohmann::json time = nlohmann::json::parse(report.out, nullptr, false);
  ASSERT_TRUE(time.is_object()) << report.out;
  EXPECT_EQ(time["comparison"], "equal_time");
  EXPECT_EQ(time["equal_time"]["rows"], both["equal_time"]["rows"]);

  const std::string figure = ReadAll(svg);
  EXPECT_NE(figure.find("<svg"), std::string::npos);
  EXPECT_NE(figure.find("id=\"time-panel\""), std::string::npos);
  EXPECT_NE(figure.find("id=\"steps-panel\""), std::string::npos);
  EXPECT_NE(figure.find("data-series=\"reference\""), std::string::npos);
  EXPECT_NE(figure.find("data-series=\"variant:wide\""), std::string::npos);
  // One reference seed per budget, but the arms' seeds measure σ_all: the
  // parametric bootstrap gives SE_R, and the figure draws its band.
  EXPECT_NE(figure.find("class=\"reference-band\""), std::string::npos);
  EXPECT_NE(figure.find("class=\"reference-line\""), std::string::npos);

  Output noise = RunCtl({"noise", "et", "--format", "csv", "--coordinator", address});
  ASSERT_EQ(noise.exit.exit_code, 0) << noise.last_error;
  EXPECT_EQ(noise.out.rfind("experiment,variant,seeds,spread", 0), 0u) << noise.out;
  EXPECT_NE(noise.out.find("et,base,2,"), std::string::npos) << noise.out;
  EXPECT_NE(noise.out.find("et,wide,2,"), std::string::npos) << noise.out;

  coordinator->process->Kill();
  coordinator->process->Wait();
}

}  // namespace
}  // namespace smallem
