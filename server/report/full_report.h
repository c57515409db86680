// The whole report of an experiment, as `smallemctl report` and
// `smallemctl noise` print it: the comparison at equal steps, at equal time,
// or both side by side (the default), the noise section, and optionally the
// figure (server/report/plot.h). One entry point for the CLI and the service, which
// gather the plan (ComparisonPlan::ForGrid of the submitted grid) and the
// runs (from the store) and pass them here.
//
// Thread-safety: pure functions, except that RenderFullReport writes the
// plot file when asked to.
#ifndef SMALLEM_SERVER_REPORT_FULL_REPORT_H_
#define SMALLEM_SERVER_REPORT_FULL_REPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/equal_steps.h"
#include "server/report/plot.h"
#include "server/report/report_format.h"

namespace smallem {

// `report --at steps|time`; kBoth is the default (no --at).
enum class CompareAt { kSteps, kTime, kBoth };

// "steps", "time" or "both"; anything else is InvalidArgument naming them.
absl::StatusOr<CompareAt> ParseCompareAt(std::string_view name);

struct FullReportOptions {
  // kBoth shows Δ at steps and Δ at time side by side when the plan has a
  // reference curve on the compared device class; otherwise the equal-steps
  // report with a line saying why equal time is missing. kTime refuses
  // instead (CompareAtEqualTime's errors).
  CompareAt at = CompareAt::kBoth;
  ReportFormat format = ReportFormat::kTable;
  // Append the noise section (table and markdown: after the report; json: a
  // "noise" key). CSV carries one table, so never a noise section: use
  // RenderNoiseReport for its CSV.
  bool noise = true;
  // "" = no figure; a path ending in .svg gets the figure (.png is refused
  // with a message saying how to convert the SVG).
  std::string plot_path;
};

// The report text (ending with a newline). Errors: those of
// CompareAtEqualSteps; with kTime, those of CompareAtEqualTime
// (FailedPrecondition without a reference curve or across device classes);
// WritePlot's, and nothing is returned then.
absl::StatusOr<std::string> RenderFullReport(const ComparisonPlan& plan,
                                             const std::vector<ComparedRun>& runs,
                                             const FullReportOptions& options);

// The figure as SVG text (server/report/plot.h), for a coordinator to send to a
// client that writes it locally (after CheckPlotPath). Draws the reference
// curve when the equal-time comparison is possible, the variants alone
// otherwise; the variants' training curves from `curves` (PlotDataFor).
// Errors: those of CompareAtEqualSteps, and CompareAtEqualTime's other than
// FailedPrecondition.
absl::StatusOr<std::string> RenderReportPlotSvg(const ComparisonPlan& plan,
                                                const std::vector<ComparedRun>& runs,
                                                const std::vector<TrainingCurve>& curves = {});

// `smallemctl noise EXP`: the noise section alone, in `format`.
absl::StatusOr<std::string> RenderNoiseReport(const ComparisonPlan& plan,
                                              const std::vector<ComparedRun>& runs,
                                              ReportFormat format);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_FULL_REPORT_H_
