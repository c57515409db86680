// A fixture database for report tests: grids submitted to a real SQLite
// file, every run leased and completed with a hand-chosen loss, and the
// report rendered as the service renders it (RenderExperimentReport).
#ifndef SMALLEM_TESTS_SERVER_REPORT_FIXTURE_H_
#define SMALLEM_TESTS_SERVER_REPORT_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/report/experiment_report.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem::testing {

// (variant, seed) → val nats/byte.
using Losses = std::map<std::pair<std::string, int64_t>, double>;

class ReportFixture : public ::testing::Test {
 protected:
  static constexpr int64_t kNow = 1'700'000'000'000;

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // Submits `grid_text`, completes every run with its loss in `losses`, and
  // returns the report in `format` at equal steps.
  std::string Report(const char* grid_text, const Losses& losses, ReportFormat format) {
    absl::StatusOr<Grid> grid = ParseGrid(grid_text, "grid.yaml");
    EXPECT_TRUE(grid.ok()) << grid.status();
    if (!grid.ok()) return "";
    Finish(*grid, grid_text, losses);
    return Render(grid->name, format);
  }

  // Submits the grid and completes each of its runs with its loss in `losses`.
  void Finish(const Grid& grid, const char* grid_text, const Losses& losses) {
    SubmissionRecord submission{.name = grid.name, .baseline = grid.baseline,
                                .grid_file = "grid.yaml", .grid_yaml = grid_text,
                                .dataset_hash = "feedbeef", .retry_budget = 2, .cells = {}};
    for (const Cell& cell : grid.Cells()) {
      submission.cells.push_back(CellRecord{
          .variant = cell.variant, .variant_kind = "variant", .spec_json = cell.spec_json,
          .spec_hash = cell.spec_hash, .seed = cell.seed, .budget = BudgetKey(cell.budget),
          .budget_steps = cell.budget.steps, .budget_minutes = cell.budget.minutes});
    }
    absl::StatusOr<SubmitOutcome> outcome = store_->Submit(submission, kNow);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    while (true) {
      absl::StatusOr<std::optional<LeaseRecord>> lease =
          store_->LeaseNextRun("w1", "cpu", "cpu:2", kNow, kNow + 60'000);
      EXPECT_TRUE(lease.ok()) << lease.status();
      if (!lease.ok() || !lease->has_value()) break;
      const RunRecord& run = (*lease)->run;
      const nlohmann::json result = {{"val_nats_per_byte", losses.at({run.variant, run.seed})},
                                     {"train_seconds", 10.0},
                                     {"steps", *run.budget_steps},
                                     {"params", 1000},
                                     {"device_class", "cpu:2"}};
      EXPECT_TRUE(store_->Complete(run.id, run.attempt, "w1", result.dump(), {}, kNow).ok());
    }
  }

  // The report of experiment `name`, rendered as the service renders it.
  std::string Render(const std::string& name, ReportFormat format) {
    absl::StatusOr<ExperimentRecord> experiment = store_->FindExperiment(name);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    if (!experiment.ok()) return "";
    absl::StatusOr<RenderedReport> report = RenderExperimentReport(
        *store_, *experiment, ReportOptions{.format = format, .at = CompareAt::kSteps});
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? report->text : "";
  }

  TempDir dir_;
  std::unique_ptr<SqliteStore> store_;
};

// The row of `variant` among `rows` (a JSON report's).
inline const nlohmann::json& RowOf(const nlohmann::json& rows, const std::string& variant) {
  for (const nlohmann::json& row : rows) {
    if (row["variant"] == variant) return row;
  }
  ADD_FAILURE() << "no row " << variant;
  static const nlohmann::json none;
  return none;
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_SERVER_REPORT_FIXTURE_H_
