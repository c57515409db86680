// The report of an experiment: the grid it was submitted with, its runs and
// their results, compared and rendered (server/report/full_report.h: equal steps,
// equal time against the reference curve, or both; the noise section; the
// figure as SVG).
#ifndef SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_
#define SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/equal_steps.h"
#include "server/report/full_report.h"
#include "server/report/plot.h"
#include "server/report/report_format.h"
#include "server/store/sqlite_store.h"

namespace smallem {

struct ReportOptions {
  ReportFormat format = ReportFormat::kTable;
  CompareAt at = CompareAt::kBoth;
  double noise_floor = 0;  // nats/byte; 0 = the comparator's default
  bool plot = false;       // also render the figure
  bool noise_only = false; // the noise section alone (`smallemctl noise`)
};

struct RenderedReport {
  std::string text;
  std::string plot_svg;  // when options.plot
  int runs_done = 0;   // runs with a result
  int runs_total = 0;
};

// What the comparator needs of one run: its cell, state, and (succeeded) the
// result's val_nats_per_byte, train_seconds, params, device_class, steps and
// eval_fingerprint (absent in older results: "").
// InvalidArgument when a result is not the result JSON of docs/architecture.md § The formats.
absl::StatusOr<ComparedRun> ToComparedRun(const RunRecord& run,
                                          const std::optional<ResultRecord>& result);

// The training curves of `runs` that the figure draws: each succeeded run
// at `plan`'s budget and seeds, of a variant of the plan (not the
// reference's), from its progress points (every attempt's, a later
// attempt's replacing an earlier one's at a step: a resumed run goes on
// from its checkpoint), converted from nats per token to nats per byte by
// its result's val_nats_per_byte / val_nats_per_token (the validation
// text's tokens per byte; a run whose result lacks them has no curve).
// The store's errors.
absl::StatusOr<std::vector<TrainingCurve>> ReadTrainingCurves(
    SqliteStore& store, const ComparisonPlan& plan, const std::vector<RunRecord>& runs,
    const std::map<int64_t, ResultRecord>& results);

// Errors of ParseGrid and RenderFullReport (FailedPrecondition for --at time
// without a reference curve).
absl::StatusOr<RenderedReport> RenderExperimentReport(SqliteStore& store,
                                                      const ExperimentRecord& experiment,
                                                      const ReportOptions& options);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_
