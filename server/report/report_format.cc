// The equal-steps report in every format (server/report/report_format.h).
#include "server/report/report_format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/report/report_text.h"

namespace smallem {
namespace {

using nlohmann::json;
using report_internal::Fixed;
using report_internal::AppendComparisonCells;
using report_internal::ParamsCell;
using report_internal::ParamsChangeCell;
using report_internal::CostCells;
using report_internal::CostHeaders;
using report_internal::NoiseLine;
using report_internal::Summary;
using report_internal::AlignedTable;
using report_internal::MarkdownTable;
using report_internal::CsvField;
using report_internal::CsvOptional;
using report_internal::JsonOptional;
using report_internal::BudgetJson;

// One row of cells as people read them; shared by table and markdown.
std::vector<std::string> Cells(const ReportRow& row) {
  std::vector<std::string> cells = {row.variant,
                                    absl::StrCat(row.seeds_finished, "/", row.seeds_expected),
                                    Fixed(row.mean_loss, "%.4f")};
  AppendComparisonCells(row, cells);
  cells.insert(cells.end(),
               {ParamsCell(row), ParamsChangeCell(row), Fixed(row.mean_train_seconds, "%.1f")});
  for (std::string& cell : CostCells(row)) cells.push_back(std::move(cell));
  return cells;
}

const std::vector<std::string>& Headers() {
  static const auto* h = [] {
    auto* headers = new std::vector<std::string>{
        "variant", "seeds", "val nats/byte", "Δ",       "95 % CI",
        "τ",       "verdict", "params",       "Δ params", "train s"};
    headers->insert(headers->end(), CostHeaders().begin(), CostHeaders().end());
    return headers;
  }();
  return *h;
}
// Columns holding numbers are right-aligned.
bool RightAligned(size_t column) { return column != 0 && column != 6; }

std::string Title(const Report& r) {
  std::string title = absl::StrCat(r.experiment, " — equal steps, ", BudgetLabel(r.budget));
  if (!r.device_class.empty()) absl::StrAppend(&title, ", device class ", r.device_class);
  return title;
}

}  // namespace

absl::StatusOr<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "markdown") return ReportFormat::kMarkdown;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "json") return ReportFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown report format \"", std::string(name), "\" (expected table, markdown, csv or json)"));
}

std::string FormatReport(const Report& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return FormatReportTable(report);
    case ReportFormat::kMarkdown: return FormatReportMarkdown(report);
    case ReportFormat::kCsv: return FormatReportCsv(report);
    case ReportFormat::kJson: return ReportToJson(report).dump(2) + "\n";
  }
  CHECK(false) << "unknown ReportFormat";
  return "";
}

std::string FormatReportTable(const Report& report) {
  std::vector<std::vector<std::string>> rows;
  for (const ReportRow& row : report.rows) rows.push_back(Cells(row));
  std::string out = absl::StrCat(Title(report), "\n", NoiseLine(report), "\n\n");
  absl::StrAppend(&out, AlignedTable(Headers(), rows, RightAligned));
  absl::StrAppend(&out, "\n", Summary(report), ".\n");
  for (const std::string& note : report.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

std::string FormatReportMarkdown(const Report& report) {
  std::string out = absl::StrCat("**", Title(report), "**\n\n", NoiseLine(report), "\n\n");
  std::vector<std::vector<std::string>> rows;
  for (const ReportRow& row : report.rows) rows.push_back(Cells(row));
  absl::StrAppend(&out, MarkdownTable(Headers(), rows, RightAligned));
  absl::StrAppend(&out, "\n", Summary(report), ".\n");
  if (!report.notes.empty()) {
    absl::StrAppend(&out, "\n");
    for (const std::string& note : report.notes) absl::StrAppend(&out, "- ", note, "\n");
  }
  return out;
}

std::string FormatReportCsv(const Report& report) {
  std::string out =
      "experiment,variant,verdict,delta_over_tau,seeds_finished,seeds_expected,"
      "mean_val_nats_per_byte,delta,se_method,se,df,t_quantile,ci_low,ci_high,tau,params,"
      "params_change,params_warning,mean_train_seconds,device_class,pending_reason,"
      "tost_low,tost_high,missable_effect,seeds_to_decide," +
      std::string(report_internal::kCostCsvHeader) + "\n";
  for (const ReportRow& row : report.rows) {
    std::vector<std::string> fields = {
        CsvField(report.experiment),
        CsvField(row.variant),
        CsvField(VerdictName(row.verdict)),
        CsvOptional(row.delta_over_tau, "%.3f"),
        absl::StrCat(row.seeds_finished),
        absl::StrCat(row.seeds_expected),
        CsvOptional(row.mean_loss, "%.6f"),
        CsvOptional(row.delta, "%.6f"),
        row.delta ? SeMethodName(row.se_method) : "",
        CsvOptional(row.se, "%.6f"),
        CsvOptional(row.df, "%.3f"),
        CsvOptional(row.t_quantile, "%.5f"),
        CsvOptional(row.ci_low, "%.6f"),
        CsvOptional(row.ci_high, "%.6f"),
        CsvOptional(row.tau, "%.6f"),
        CsvOptional(row.params, "%d"),
        CsvOptional(row.params_change, "%.5f"),
        row.params_warning ? "true" : "false",
        CsvOptional(row.mean_train_seconds, "%.3f"),
        CsvField(report.device_class),
        CsvField(row.pending_reason),
        CsvOptional(row.tost_low, "%.6f"),
        CsvOptional(row.tost_high, "%.6f"),
        CsvOptional(row.missable_effect, "%.6f"),
        row.decide_beyond_max ? absl::StrCat(">", kMaxSeedsToDecide)
                              : CsvOptional(row.seeds_to_decide, "%d")};
    for (std::string& field : report_internal::CostCsvFields(row)) fields.push_back(field);
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}
json NoiseModelJson(const NoiseModel& noise) {
  json arms = json::array();
  for (const ArmNoise& a : noise.arms) {
    arms.push_back({{"variant", a.name},
                    {"seeds", a.seeds},
                    {"stddev", JsonOptional(a.stddev)},
                    {"f_ratio", JsonOptional(a.f_ratio)},
                    {"f_df", a.f_ratio ? json({a.seeds - 1, *a.f_df_rest}) : json(nullptr)},
                    {"f_p", JsonOptional(a.f_p)},
                    {"departs", a.departs}});
  }
  return {{"sigma", JsonOptional(noise.sigma)},
          {"df", noise.df},
          {"variance_test_level", kVarianceTestLevel},
          {"arms", arms}};
}

json ReportToJson(const Report& report) {
  json rows = json::array();
  for (const ReportRow& row : report.rows) {
    json r = {{"variant", row.variant},
                    {"verdict", VerdictName(row.verdict)},
                    {"verdict_text", row.VerdictText()},
                    {"seeds_finished", row.seeds_finished},
                    {"seeds_expected", row.seeds_expected},
                    {"losses", row.losses},
                    {"mean_val_nats_per_byte", JsonOptional(row.mean_loss)},
                    {"delta", JsonOptional(row.delta)},
                    {"se_method", row.delta ? json(SeMethodName(row.se_method)) : json(nullptr)},
                    {"se", JsonOptional(row.se)},
                    {"df", JsonOptional(row.df)},
                    {"t_quantile", JsonOptional(row.t_quantile)},
                    {"ci_low", JsonOptional(row.ci_low)},
                    {"ci_high", JsonOptional(row.ci_high)},
                    {"tau", JsonOptional(row.tau)},
                    {"alpha", row.delta ? json(row.alpha) : json(nullptr)},
                    {"delta_over_tau", JsonOptional(row.delta_over_tau)},
                    {"tost_low", JsonOptional(row.tost_low)},
                    {"tost_high", JsonOptional(row.tost_high)},
                    {"missable_effect", JsonOptional(row.missable_effect)},
                    {"seeds_to_decide", JsonOptional(row.seeds_to_decide)},
                    {"decide_beyond_max", row.decide_beyond_max},
                    {"welch_t", JsonOptional(row.welch_t)},
                    {"welch_df", JsonOptional(row.welch_df)},
                    {"params", JsonOptional(row.params)},
                    {"total_params", JsonOptional(row.total_params)},
                    {"params_change", JsonOptional(row.params_change)},
                    {"params_warning", row.params_warning},
                    {"mean_train_seconds", JsonOptional(row.mean_train_seconds)},
                    {"pending_reason", row.pending_reason.empty() ? json(nullptr)
                                                                  : json(row.pending_reason)}};
    report_internal::AddCostJson(row, r);
    rows.push_back(std::move(r));
  }
  json left_out = json::array();
  for (const LeftOutRun& r : report.left_out) {
    left_out.push_back({{"variant", r.variant}, {"seed", r.seed},
                        {"device_class", r.device_class}});
  }
  return {{"experiment", report.experiment},
          {"comparison", "equal_steps"},
          {"baseline", report.baseline},
          {"budget", BudgetJson(report.budget)},
          {"device_class", report.device_class},
          {"noise_floor", report.noise_floor},
          {"noise_model", NoiseModelJson(report.noise)},
          {"complete", report.Complete()},
          {"family", {{"variants", report.family_size},
                      {"alpha", kAlpha},
                      {"holm", report.holm},
                      {"expected_false_verdicts",
                       report.holm ? json(nullptr) : json(report.family_size * kAlpha)}}},
          {"rows", rows},
          {"left_out", left_out},
          {"notes", report.notes}};
}

}  // namespace smallem
