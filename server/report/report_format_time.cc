// The equal-time and combined reports in every format (server/report/report_format.h).
#include "server/report/report_format.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "base/text.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/report/report_text.h"
#include "runspec/run_result.h"

namespace smallem {
namespace {

using nlohmann::json;
using report_internal::kNone;
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

// "1.5432" or "1.5432 (extrapolated ×0.82)".
std::string ReferenceCell(const TimeRow& row) {
  if (!row.reference_loss) return kNone;
  std::string cell = absl::StrFormat("%.4f", *row.reference_loss);
  if (row.extrapolated) {
    absl::StrAppend(&cell, absl::StrFormat(" (extrapolated ×%.2f)", row.span_ratio));
  }
  return cell;
}

std::string TimeTitle(const TimeReport& r, bool combined) {
  std::string title = absl::StrCat(
      r.steps.experiment,
      combined ? absl::StrCat(" — equal steps (", BudgetLabel(r.steps.budget), ") and equal time")
               : absl::StrCat(" — equal time (variants at ", BudgetLabel(r.steps.budget), ")"));
  if (!r.device_class.empty()) absl::StrAppend(&title, ", device class ", r.device_class);
  return title;
}

// The curve: its model, one line per point (with the model's residual and
// its leave-one-out miss), or why there are none yet.
std::vector<std::string> CurveLines(const TimeReport& r) {
  std::vector<std::string> lines;
  if (r.curve.empty() || !r.choice) {
    lines.push_back(absl::StrCat("reference curve: ", r.curve.size(), " of ", r.curve_budgets,
                                 " budgets finished on ",
                                 r.device_class.empty() ? "any device class" : r.device_class,
                                 " (two are needed)"));
    return lines;
  }
  const CurveChoice& c = *r.choice;
  lines.push_back(absl::StrFormat(
      "reference curve (%d of %d budgets, mean of each budget's seeds): R(t) = %s",
      static_cast<int>(r.curve.size()), r.curve_budgets, c.curve.Describe()));
  lines.push_back(absl::StrCat(
      "  point noise: ",
      c.sigma ? absl::StrFormat("σ = %.4f (df %d, from the %s)", *c.sigma, c.sigma_df,
                                c.sigma_source)
              : std::string("not measured"),
      c.misfit ? absl::StrFormat("; fit χ²/dof = %.2f", *c.misfit) : std::string(),
      r.time_spread.df > 0 ? absl::StrFormat("; training time cv %.4f (df %d)", r.time_spread.cv,
                                             r.time_spread.df)
                           : std::string(),
      r.bootstrap ? absl::StrFormat("; SE_R(t) from %d parametric bootstrap resamples (seed %d)",
                                    r.bootstrap->resamples(),
                                    static_cast<int64_t>(kBootstrapSeed))
                  : std::string()));
  const std::vector<double> residuals = c.curve.Residuals();
  for (size_t i = 0; i < c.curve.points().size(); ++i) {
    const CurvePoint& p = c.curve.points()[i];
    std::string line = absl::StrFormat("  %s: %.1f s, %.4f nats/byte (%d seed%s)",
                                       BudgetLabel(p.budget), p.seconds, p.loss,
                                       static_cast<int>(p.seed_losses.size()),
                                       p.seed_losses.size() == 1 ? "" : "s");
    if (c.curve.fit()) absl::StrAppend(&line, absl::StrFormat(", fit residual %+.4f", residuals[i]));
    for (const LeftOut& m : c.left_out) {
      if (m.budget != p.budget) continue;
      absl::StrAppend(&line, absl::StrFormat(", left out: predicted %.4f, miss %+.4f", m.predicted,
                                             m.miss));
      if (m.tau) {
        absl::StrAppend(&line, absl::StrFormat(" (τ %.4f%s)", *m.tau, m.exceeds ? ", exceeds" : ""));
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string TimeSummary(const TimeReport& r) {
  int compared = 0, pending = 0, extrapolated = 0, diverged = 0;
  for (const TimeRow& row : r.rows) {
    if (row.verdict == Verdict::kPending) ++pending;
    else if (row.verdict == Verdict::kDiverged) ++diverged;
    else ++compared;
    extrapolated += row.extrapolated;
  }
  std::string s = absl::StrCat(CountedNoun(compared, "variant", "variants"),
                               " compared with the reference curve at equal time");
  if (extrapolated > 0) absl::StrAppend(&s, ", ", extrapolated, " extrapolated");
  if (pending > 0) absl::StrAppend(&s, ", ", pending, " pending");
  if (diverged > 0) absl::StrAppend(&s, ", ", diverged, " diverged");
  absl::StrAppend(&s, absl::StrFormat(
                         " (Δ time = loss − R(t); better/worse: |Δ| > the row's τ time; "
                         "equivalent: the 90 %% interval inside ±%.4f; undecided: neither)",
                         r.steps.noise_floor));
  return s;
}

std::vector<std::string> AllNotes(const TimeReport& r) {
  std::vector<std::string> notes = r.steps.notes;
  notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  return notes;
}

const std::vector<std::string>& TimeHeaders() {
  static const auto* h = [] {
    auto* headers = new std::vector<std::string>{
        "variant", "seeds", "val nats/byte", "train s", "R(t)", "Δ time", "95 % CI", "τ time",
        "verdict", "params", "Δ params"};
    headers->insert(headers->end(), CostHeaders().begin(), CostHeaders().end());
    return headers;
  }();
  return *h;
}
bool TimeRightAligned(size_t c) { return c != 0 && c != 4 && c != 8; }

std::vector<std::string> TimeCells(const ReportRow& s, const TimeRow& t) {
  std::vector<std::string> cells = {s.variant,
                                    absl::StrCat(s.seeds_finished, "/", s.seeds_expected),
                                    Fixed(s.mean_loss, "%.4f"),
                                    Fixed(s.mean_train_seconds, "%.1f"), ReferenceCell(t)};
  AppendComparisonCells(t, cells);
  cells.insert(cells.end(), {ParamsCell(s), ParamsChangeCell(s)});
  for (std::string& cell : CostCells(s)) cells.push_back(std::move(cell));
  return cells;
}

const std::vector<std::string>& CombinedHeaders() {
  static const auto* h = [] {
    auto* headers = new std::vector<std::string>{
        "variant", "seeds", "val nats/byte", "Δ steps", "95 % CI", "τ", "at equal steps",
        "train s", "R(t)", "Δ time", "95 % CI", "τ time", "at equal time", "params",
        "Δ params"};
    headers->insert(headers->end(), CostHeaders().begin(), CostHeaders().end());
    return headers;
  }();
  return *h;
}
bool CombinedRightAligned(size_t c) { return c != 0 && c != 6 && c != 8 && c != 12; }

std::vector<std::string> CombinedCells(const ReportRow& s, const TimeRow& t) {
  std::vector<std::string> cells = {s.variant,
                                    absl::StrCat(s.seeds_finished, "/", s.seeds_expected),
                                    Fixed(s.mean_loss, "%.4f")};
  AppendComparisonCells(s, cells);
  cells.insert(cells.end(), {Fixed(s.mean_train_seconds, "%.1f"), ReferenceCell(t)});
  AppendComparisonCells(t, cells);
  cells.insert(cells.end(), {ParamsCell(s), ParamsChangeCell(s)});
  for (std::string& cell : CostCells(s)) cells.push_back(std::move(cell));
  return cells;
}

// Table or markdown for the time and combined reports.
std::string TimeText(const TimeReport& r, bool combined, bool markdown) {
  CHECK_EQ(r.rows.size(), r.steps.rows.size());
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    rows.push_back(combined ? CombinedCells(r.steps.rows[i], r.rows[i])
                            : TimeCells(r.steps.rows[i], r.rows[i]));
  }
  const std::vector<std::string>& headers = combined ? CombinedHeaders() : TimeHeaders();
  const std::function<bool(size_t)> right = combined ? CombinedRightAligned : TimeRightAligned;
  const std::string title = TimeTitle(r, combined);
  std::string out = markdown ? absl::StrCat("**", title, "**\n\n") : absl::StrCat(title, "\n");
  absl::StrAppend(&out, NoiseLine(r.steps), markdown ? "\n\n" : "\n");
  for (const std::string& line : CurveLines(r)) {
    absl::StrAppend(&out, markdown && line.starts_with("  ") ? "- " + line.substr(2) : line,
                    "\n");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, markdown ? MarkdownTable(headers, rows, right)
                                 : AlignedTable(headers, rows, right));
  absl::StrAppend(&out, "\n");
  if (combined) absl::StrAppend(&out, Summary(r.steps), ".\n");
  absl::StrAppend(&out, TimeSummary(r), ".\n");
  const std::vector<std::string> notes = AllNotes(r);
  if (markdown && !notes.empty()) absl::StrAppend(&out, "\n");
  for (const std::string& note : notes) {
    absl::StrAppend(&out, markdown ? "- " : "note: ", note, "\n");
  }
  return out;
}

std::string TimeCsv(const TimeReport& r) {
  std::string out =
      "experiment,variant,verdict,delta_over_tau,seeds_finished,seeds_expected,"
      "mean_val_nats_per_byte,mean_train_seconds,reference_loss,delta,slope,se_variant,"
      "se_reference,se_seconds,se_model,se,df,t_quantile,ci_low,ci_high,tau,extrapolated,"
      "span_ratio,params,device_class,pending_reason,tost_low,tost_high,missable_effect,"
      "seeds_to_decide," +
      std::string(report_internal::kCostCsvHeader) + "\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const ReportRow& s = r.steps.rows[i];
    const TimeRow& t = r.rows[i];
    std::vector<std::string> fields = {
        CsvField(r.steps.experiment),
        CsvField(t.variant),
        CsvField(VerdictName(t.verdict)),
        CsvOptional(t.delta_over_tau, "%.3f"),
        absl::StrCat(s.seeds_finished),
        absl::StrCat(s.seeds_expected),
        CsvOptional(s.mean_loss, "%.6f"),
        CsvOptional(s.mean_train_seconds, "%.3f"),
        CsvOptional(t.reference_loss, "%.6f"),
        CsvOptional(t.delta, "%.6f"),
        CsvOptional(t.slope, "%.8f"),
        CsvOptional(t.se_variant, "%.6f"),
        CsvOptional(t.se_reference, "%.6f"),
        CsvOptional(t.se_seconds, "%.4f"),
        CsvOptional(t.se_model, "%.6f"),
        CsvOptional(t.se, "%.6f"),
        CsvOptional(t.df, "%.3f"),
        CsvOptional(t.t_quantile, "%.5f"),
        CsvOptional(t.ci_low, "%.6f"),
        CsvOptional(t.ci_high, "%.6f"),
        CsvOptional(t.tau, "%.6f"),
        t.extrapolated ? "true" : "false",
        t.reference_loss ? absl::StrFormat("%.4f", t.span_ratio) : "",
        CsvOptional(s.params, "%d"),
        CsvField(r.device_class),
        CsvField(t.pending_reason),
        CsvOptional(t.tost_low, "%.6f"),
        CsvOptional(t.tost_high, "%.6f"),
        CsvOptional(t.missable_effect, "%.6f"),
        t.decide_beyond_max ? absl::StrCat(">", kMaxSeedsToDecide)
                            : CsvOptional(t.seeds_to_decide, "%d")};
    for (std::string& field : report_internal::CostCsvFields(s)) fields.push_back(field);
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

std::string CombinedCsv(const TimeReport& r) {
  // The equal-steps CSV, each line extended with the equal-time columns.
  const std::vector<std::string> lines = absl::StrSplit(FormatReportCsv(r.steps), '\n');
  std::string out = absl::StrCat(
      lines[0], ",reference_loss,delta_time,ci_low_time,ci_high_time,tau_time,"
      "delta_time_over_tau,verdict_time,extrapolated,span_ratio\n");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const TimeRow& t = r.rows[i];
    std::vector<std::string> fields = {
        lines[i + 1],
        CsvOptional(t.reference_loss, "%.6f"),
        CsvOptional(t.delta, "%.6f"),
        CsvOptional(t.ci_low, "%.6f"),
        CsvOptional(t.ci_high, "%.6f"),
        CsvOptional(t.tau, "%.6f"),
        CsvOptional(t.delta_over_tau, "%.3f"),
        CsvField(VerdictName(t.verdict)),
        t.extrapolated ? "true" : "false",
        t.reference_loss ? absl::StrFormat("%.4f", t.span_ratio) : ""};
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

}  // namespace

std::string FormatTimeReport(const TimeReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return TimeText(report, false, false);
    case ReportFormat::kMarkdown: return TimeText(report, false, true);
    case ReportFormat::kCsv: return TimeCsv(report);
    case ReportFormat::kJson: return TimeReportToJson(report).dump(2) + "\n";
  }
  CHECK(false) << "unknown ReportFormat";
  return "";
}

std::string FormatCombinedReport(const TimeReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: return TimeText(report, true, false);
    case ReportFormat::kMarkdown: return TimeText(report, true, true);
    case ReportFormat::kCsv: return CombinedCsv(report);
    case ReportFormat::kJson: return TimeReportToJson(report, true).dump(2) + "\n";
  }
  CHECK(false) << "unknown ReportFormat";
  return "";
}

namespace {

json CurveJson(const TimeReport& report) {
  if (!report.choice) return nullptr;
  const CurveChoice& c = *report.choice;
  json fit = nullptr;
  if (c.curve.fit()) {
    const FormFit& f = *c.curve.fit();
    fit = {{"form", FormName(f.form)}, {"l_inf", f.l_inf}, {"a", f.a}, {"alpha", f.alpha},
           {"t0", f.t0}, {"beta", f.beta}, {"t_ref", f.t_ref}};
  }
  json left_out = json::array();
  for (const LeftOut& m : c.left_out) {
    left_out.push_back({{"budget", BudgetJson(m.budget)}, {"seconds", m.seconds},
                        {"measured", m.measured}, {"predicted", m.predicted}, {"miss", m.miss},
                        {"same_model", m.same_model},
                        {"noise_variance", JsonOptional(m.noise_variance)},
                        {"tau", JsonOptional(m.tau)}, {"exceeds", m.exceeds}});
  }
  return {{"model", CurveModelName(c.curve.model())},
          {"description", c.curve.Describe()},
          {"fit", fit},
          {"residuals", c.curve.Residuals()},
          {"point_sigma", JsonOptional(c.sigma)},
          {"point_sigma_df", c.sigma_df},
          {"point_sigma_source", c.sigma_source},
          {"misfit", JsonOptional(c.misfit)},
          {"left_out", left_out},
          {"time_cv", report.time_spread.cv},
          {"time_cv_df", report.time_spread.df},
          {"bootstrap_resamples", report.bootstrap ? report.bootstrap->resamples() : 0},
          {"bootstrap_seed", kBootstrapSeed}};
}

}  // namespace

json TimeReportToJson(const TimeReport& report, bool combined) {
  json j = ReportToJson(report.steps);
  j["comparison"] = combined ? "equal_steps_and_time" : "equal_time";
  json reference = json::array();
  for (const CurvePoint& p : report.curve) {
    reference.push_back({{"budget", BudgetJson(p.budget)},
                         {"seconds", p.seconds},
                         // named as in a result: the point's mean loss
                         {result_keys::kValNatsPerByte, p.loss},
                         {"seeds", p.seed_losses.size()},
                         {"seed_losses", p.seed_losses},
                         {"seed_seconds", p.seed_seconds}});
  }
  json rows = json::array();
  for (const TimeRow& row : report.rows) {
    rows.push_back({{"variant", row.variant},
                    {"verdict", VerdictName(row.verdict)},
                    {"verdict_text", row.VerdictText()},
                    {"mean_train_seconds", JsonOptional(row.mean_seconds)},
                    {"mean_val_nats_per_byte", JsonOptional(row.mean_loss)},
                    {"reference_loss", JsonOptional(row.reference_loss)},
                    {"delta", JsonOptional(row.delta)},
                    {"slope", JsonOptional(row.slope)},
                    {"se_variant", JsonOptional(row.se_variant)},
                    {"se_reference", JsonOptional(row.se_reference)},
                    {"se_seconds", JsonOptional(row.se_seconds)},
                    {"se_model", JsonOptional(row.se_model)},
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
                    {"extrapolated", row.extrapolated},
                    {"span_ratio", row.reference_loss ? json(row.span_ratio) : json(nullptr)},
                    {"pending_reason", row.pending_reason.empty() ? json(nullptr)
                                                                  : json(row.pending_reason)}});
  }
  j["equal_time"] = {{"device_class", report.device_class},
                     {"curve_budgets", report.curve_budgets},
                     {"reference", reference},
                     {"curve", CurveJson(report)},
                     {"rows", rows},
                     {"complete", report.Complete()},
                     {"notes", report.notes}};
  return j;
}

}  // namespace smallem
