#include "server/report/full_report.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/analysis/noise_report.h"
#include "server/analysis/equal_time.h"
#include "server/report/plot.h"

namespace smallem {

absl::StatusOr<CompareAt> ParseCompareAt(std::string_view name) {
  if (name == "steps") return CompareAt::kSteps;
  if (name == "time") return CompareAt::kTime;
  if (name == "both") return CompareAt::kBoth;
  return absl::InvalidArgumentError(absl::StrCat("unknown comparison \"", std::string(name),
                                                 "\" (expected steps, time or both)"));
}

absl::StatusOr<std::string> RenderFullReport(const ComparisonPlan& plan,
                                             const std::vector<ComparedRun>& runs,
                                             const FullReportOptions& options) {
  if (!options.plot_path.empty()) RETURN_IF_ERROR(CheckPlotPath(options.plot_path));
  ASSIGN_OR_RETURN(Report steps, CompareAtEqualSteps(plan, runs));

  // The equal-time comparison: required for --at time, shown when possible
  // by default, and drawn in the figure whenever it exists.
  std::optional<TimeReport> time;
  std::string time_missing;  // why the default report shows equal steps alone
  if (options.at != CompareAt::kSteps || !options.plot_path.empty()) {
    absl::StatusOr<TimeReport> t = CompareAtEqualTime(plan, runs);
    if (t.ok()) {
      time = *std::move(t);
    } else if (options.at == CompareAt::kTime ||
               t.status().code() != absl::StatusCode::kFailedPrecondition) {
      return t.status();
    } else {
      time_missing = std::string(t.status().message());
    }
  }
  const bool show_time = time.has_value() && options.at != CompareAt::kSteps;
  if (options.at == CompareAt::kSteps) time_missing.clear();

  if (!options.plot_path.empty()) {
    const PlotData data = time ? PlotDataFor(*time) : PlotDataFor(steps, plan, runs);
    RETURN_IF_ERROR(WritePlot(data, options.plot_path));
  }

  const NoiseReport noise = AnalyzeNoise(steps);
  std::string text;
  switch (options.format) {
    case ReportFormat::kJson: {
      nlohmann::json j = !show_time ? ReportToJson(steps)
                                    : TimeReportToJson(*time, options.at == CompareAt::kBoth);
      if (!time_missing.empty()) j["equal_time_missing"] = time_missing;
      if (options.noise) j["noise"] = NoiseToJson(noise);
      if (!options.plot_path.empty()) j["plot"] = options.plot_path;
      return j.dump(2) + "\n";
    }
    case ReportFormat::kCsv:
      if (!show_time) return FormatReport(steps, ReportFormat::kCsv);
      return options.at == CompareAt::kTime ? FormatTimeReport(*time, ReportFormat::kCsv)
                                            : FormatCombinedReport(*time, ReportFormat::kCsv);
    case ReportFormat::kTable:
    case ReportFormat::kMarkdown: {
      const bool markdown = options.format == ReportFormat::kMarkdown;
      if (!show_time) {
        text = FormatReport(steps, options.format);
      } else if (options.at == CompareAt::kTime) {
        text = FormatTimeReport(*time, options.format);
      } else {
        text = FormatCombinedReport(*time, options.format);
      }
      if (!time_missing.empty() && !plan.reference) {
        // No reference block was asked for: one short line, not the
        // error --at time gives (which says how to add one).
        absl::StrAppend(&text, markdown ? "\n- " : "note: ",
                        "equal steps only: no `reference` block for equal time "
                        "(docs/grid-format.md)\n");
      } else if (!time_missing.empty()) {
        absl::StrAppend(&text, markdown ? "\n- " : "note: ", "equal time not shown: ", time_missing,
                        ".\n");
      }
      if (options.noise) absl::StrAppend(&text, "\n", FormatNoise(noise, options.format));
      if (!options.plot_path.empty()) {
        absl::StrAppend(&text, "\nplot written to ", options.plot_path, "\n");
      }
      return text;
    }
  }
  return absl::InternalError("unknown report format");
}

absl::StatusOr<std::string> RenderReportPlotSvg(const ComparisonPlan& plan,
                                                const std::vector<ComparedRun>& runs,
                                                const std::vector<TrainingCurve>& curves) {
  ASSIGN_OR_RETURN(Report steps, CompareAtEqualSteps(plan, runs));
  absl::StatusOr<TimeReport> time = CompareAtEqualTime(plan, runs);
  if (time.ok()) return RenderPlotSvg(PlotDataFor(*time, curves));
  if (time.status().code() != absl::StatusCode::kFailedPrecondition) return time.status();
  return RenderPlotSvg(PlotDataFor(steps, plan, runs, curves));
}

absl::StatusOr<std::string> RenderNoiseReport(const ComparisonPlan& plan,
                                              const std::vector<ComparedRun>& runs,
                                              ReportFormat format) {
  ASSIGN_OR_RETURN(Report steps, CompareAtEqualSteps(plan, runs));
  return FormatNoise(AnalyzeNoise(steps), format);
}

}  // namespace smallem
