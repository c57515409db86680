#include "server/queue/submission.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "corpus/dataset_format.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"

namespace smallem {
namespace {

// Every run needs at least one window of context + 1 tokens in each split;
// a dataset too small for a variant's context is refused here rather than
// failing every run on a worker. meta.json is one chunk (it is small).
absl::Status CheckDatasetFitsGrid(SqliteStore& store, const std::string& hash, const Grid& grid,
                                  const std::string& file_name) {
  ASSIGN_OR_RETURN(std::string meta_text, store.ReadDatasetChunk(hash, kMetaFile, 0));
  const nlohmann::json meta = nlohmann::json::parse(meta_text, nullptr, false);
  const auto tokens = [&](const char* field) -> int64_t {
    return meta.is_object() && meta.contains(field) && meta[field].is_number_integer()
               ? meta[field].get<int64_t>()
               : -1;
  };
  const int64_t train = tokens("train_tokens");
  const int64_t val = tokens("val_tokens");
  if (train < 0 || val < 0) return absl::OkStatus();  // an older meta.json: the worker checks
  std::vector<const std::string*> specs;
  for (const GridVariant& v : grid.variants) specs.push_back(&v.spec_json);
  if (grid.reference) specs.push_back(&grid.reference->spec_json);
  for (const std::string* spec : specs) {
    const nlohmann::json j = nlohmann::json::parse(*spec, nullptr, false);
    if (!j.is_object() || !j.contains("context") || !j["context"].is_number_integer()) continue;
    const int64_t context = j["context"].get<int64_t>();
    if (train < context + 1 || val < context + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          file_name, ": dataset ", grid.data, " has ", train, " training and ", val,
          " validation tokens; a context of ", context, " needs at least ", context + 1,
          " in each (prepare a larger corpus or lower context)"));
    }
  }
  return absl::OkStatus();
}

// Sequential seeds: the cells its looks queued beyond `start` (of the
// grid's variants, at its budget) join a resubmission, so that cancelled or
// failed ones are reissued like the start seeds' — and none is added: a
// resubmission queues no seed the looks did not.
absl::Status AddLookCells(SqliteStore& store, const Grid& grid, SubmissionRecord& record) {
  if (!grid.sequential) return absl::OkStatus();
  absl::StatusOr<ExperimentRecord> existing = store.FindExperiment(grid.name);
  if (absl::IsNotFound(existing.status())) return absl::OkStatus();
  RETURN_IF_ERROR(existing.status());
  ASSIGN_OR_RETURN(const std::vector<RunRecord> runs, store.ListRuns(existing->id));
  std::set<std::string> keys;
  for (const CellRecord& c : record.cells) {
    keys.insert(absl::StrCat(c.spec_hash, "/", c.seed, "/", c.budget));
  }
  const std::string budget = BudgetKey(grid.budget);
  for (const RunRecord& run : runs) {
    const GridVariant* v = grid.FindVariant(run.variant);
    if (run.variant_kind != "variant" || run.budget != budget || v == nullptr ||
        v->spec_hash != run.spec_hash ||
        !keys.insert(absl::StrCat(run.spec_hash, "/", run.seed, "/", run.budget)).second) {
      continue;
    }
    record.cells.push_back(CellRecord{
        .variant = v->name, .variant_kind = "variant", .spec_json = v->spec_json,
        .spec_hash = v->spec_hash, .seed = run.seed, .budget = budget,
        .budget_steps = grid.budget.steps, .budget_minutes = grid.budget.minutes});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SubmittedGrid> SubmitGrid(SqliteStore& store, const Clock& clock,
                                         const GridSubmission& submission,
                                         int default_retry_budget, int64_t max_runs) {
  // A name for messages and a relative data directory, not a document.
  constexpr size_t kMaxFileNameBytes = 1024;
  if (submission.file_name.size() > kMaxFileNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("grid_file_name: ", submission.file_name.size(),
                                                   " bytes; at most ", kMaxFileNameBytes));
  }
  if (submission.yaml.size() > kMaxGridBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        submission.file_name, ": ", submission.yaml.size(), " bytes; grid files are limited to ",
        kMaxGridBytes, " bytes"));
  }
  // Each retry is a whole training run: beyond this, a crash loop.
  constexpr int kMaxRetryBudget = 100;
  if (submission.retry_budget < 0 || submission.retry_budget > kMaxRetryBudget) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retry_budget: ", submission.retry_budget, "; expected 0 (the default) to ",
        kMaxRetryBudget));
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

  RETURN_IF_ERROR(CheckDatasetFitsGrid(store, hash->second, grid, submission.file_name));

  SubmissionRecord record{.name = grid.name, .baseline = grid.baseline,
                          .grid_file = submission.file_name, .grid_yaml = submission.yaml,
                          .dataset_hash = hash->second,
                          .seed_schedule = grid.sequential ? grid.sequential->ToJson() : "",
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
  RETURN_IF_ERROR(AddLookCells(store, grid, record));
  ASSIGN_OR_RETURN(SubmitOutcome outcome, store.Submit(record, clock.NowUnixMs()));
  return SubmittedGrid{.experiment_name = grid.name, .outcome = outcome};
}

}  // namespace smallem
