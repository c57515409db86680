// The report of an experiment: the grid it was submitted with, its runs and
// their results, compared and rendered (server/report/full_report.h: equal steps,
// equal time against the reference curve, or both; the noise section; the
// figure as SVG).
#ifndef SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_
#define SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/comparator.h"
#include "server/report/full_report.h"
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

// Errors of ParseGrid and RenderFullReport (FailedPrecondition for --at time
// without a reference curve).
absl::StatusOr<RenderedReport> RenderExperimentReport(SqliteStore& store,
                                                      const ExperimentRecord& experiment,
                                                      const ReportOptions& options);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_EXPERIMENT_REPORT_H_
