#include "server/queue/submission.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/grid/grid.h"

namespace smallem {

absl::StatusOr<SubmittedGrid> SubmitGrid(SqliteStore& store, const Clock& clock,
                                         const GridSubmission& submission,
                                         int default_retry_budget, int64_t max_runs) {
  if (submission.yaml.size() > kMaxGridBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        submission.file_name, ": ", submission.yaml.size(), " bytes; grid files are limited to ",
        kMaxGridBytes, " bytes"));
  }
  if (submission.retry_budget < 0) {
    return absl::InvalidArgumentError("retry_budget: must be 0 (the default) or positive");
  }
  ASSIGN_OR_RETURN(Grid grid, ParseGrid(submission.yaml, submission.file_name));
  auto hash = submission.dataset_hashes.find(grid.data_dir);
  if (hash == submission.dataset_hashes.end() || hash->second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        submission.file_name, ": no content hash was sent for its dataset ", grid.data_dir,
        " (`smallemctl submit` uploads the dataset and sends it)"));
  }
  if (grid.RunCountBound() > max_runs) {
    return absl::InvalidArgumentError(absl::StrCat(
        submission.file_name, ": expands to ", grid.RunCountBound(),
        " runs; one submission may queue at most ", max_runs,
        " (fewer seeds or axis values; a coordinator started with "
        "--max-runs-per-submission N takes more)"));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store.DatasetBytes(hash->second));
  if (!bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", grid.data_dir, " (", hash->second,
        ") is not on the coordinator; upload it first (`smallemctl submit` does)"));
  }

  SubmissionRecord record{.name = grid.name, .baseline = grid.baseline,
                          .grid_file = submission.file_name, .grid_yaml = submission.yaml,
                          .dataset_hash = hash->second,
                          .retry_budget = submission.retry_budget > 0 ? submission.retry_budget
                                                                      : default_retry_budget,
                          .cells = {}};
  std::vector<Cell> cells = grid.Cells();
  record.cells.reserve(cells.size());
  for (Cell& cell : cells) {
    record.cells.push_back(CellRecord{
        .variant = std::move(cell.variant),
        .variant_kind = cell.kind == CellKind::kReference ? "reference" : "variant",
        .spec_json = std::move(cell.spec_json), .spec_hash = std::move(cell.spec_hash),
        .seed = cell.seed, .budget = BudgetKey(cell.budget),
        .budget_steps = cell.budget.steps, .budget_minutes = cell.budget.minutes});
  }
  ASSIGN_OR_RETURN(SubmitOutcome outcome, store.Submit(record, clock.NowUnixMs()));
  return SubmittedGrid{.experiment_name = grid.name, .outcome = outcome};
}

}  // namespace smallem
