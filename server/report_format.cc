#include "server/report_format.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/check.h"
#include "nlohmann/json.hpp"
#include "server/grid.h"

namespace smallem {
namespace {

using nlohmann::json;

// Characters on screen, not bytes: τ, Δ and — are one column each.
size_t DisplayWidth(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string Grouped(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

constexpr char kNone[] = "—";

// One row of cells as people read them; shared by table and markdown.
std::vector<std::string> Cells(const ReportRow& row) {
  auto loss = [](const std::optional<double>& v, const char* format) {
    return v ? absl::StrFormat(format, *v) : std::string(kNone);
  };
  std::string params = row.params ? Grouped(*row.params) : kNone;
  std::string params_change = kNone;
  if (row.params_change) {
    params_change = absl::StrFormat("%+.1f %%", 100 * *row.params_change);
    if (row.params_warning) params_change += " !";
  }
  return {row.variant,
          absl::StrCat(row.seeds_finished, "/", row.seeds_expected),
          loss(row.mean_loss, "%.4f"),
          loss(row.delta, "%+.4f"),
          row.VerdictText(),
          params,
          params_change,
          loss(row.mean_train_seconds, "%.1f")};
}

const std::vector<std::string>& Headers() {
  static const auto* h = new std::vector<std::string>{
      "variant", "seeds", "val nats/byte", "Δ", "verdict", "params", "Δ params", "train s"};
  return *h;
}
// Columns holding numbers are right-aligned.
bool RightAligned(size_t column) { return column != 0 && column != 4; }

std::string Title(const Report& r) {
  std::string title = absl::StrCat(r.experiment, " — equal steps, ", BudgetLabel(r.budget));
  if (!r.device_class.empty()) absl::StrAppend(&title, ", device class ", r.device_class);
  return title;
}

std::string NoiseLine(const Report& r) {
  if (!r.tau) {
    return absl::StrFormat(
        "noise threshold τ: not known until every baseline seed has finished (floor %.4f)",
        r.noise_floor);
  }
  const size_t seeds = r.rows.empty() ? 0 : r.rows.front().losses.size();
  if (seeds < 2) {
    return absl::StrFormat(
        "noise threshold τ = %.4f nats/byte: the floor (one baseline seed: noise not measured)",
        *r.tau);
  }
  const std::string over = absl::StrFormat("max − min over %d seed%s", seeds,
                                           seeds == 1 ? "" : "s");
  if (*r.baseline_spread > r.noise_floor) {
    return absl::StrFormat(
        "noise threshold τ = %.4f nats/byte: the baseline's spread (%s), above the %.4f floor",
        *r.tau, over, r.noise_floor);
  }
  return absl::StrFormat(
      "noise threshold τ = %.4f nats/byte: the floor (the baseline's spread, %s, is %.4f)",
      *r.tau, over, *r.baseline_spread);
}

std::string Summary(const Report& r) {
  int compared = 0, pending = 0;
  for (const ReportRow& row : r.rows) {
    if (row.verdict == Verdict::kPending) ++pending;
    else if (row.verdict != Verdict::kBaseline) ++compared;
  }
  std::string s = absl::StrCat(compared, " variant(s) compared with ", r.baseline);
  if (pending > 0) absl::StrAppend(&s, ", ", pending, " pending");
  absl::StrAppend(&s, " (lower is better; a verdict needs |Δ| > τ)");
  return s;
}

// Aligned text columns; `right(c)` says which columns are right-aligned.
std::string AlignedTable(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::function<bool(size_t)>& right) {
  std::vector<std::vector<std::string>> lines = {headers};
  lines.insert(lines.end(), rows.begin(), rows.end());
  std::vector<size_t> width(headers.size(), 0);
  for (const auto& line : lines) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], DisplayWidth(line[c]));
  }
  std::string out;
  for (const auto& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - DisplayWidth(line[c]), ' ');
      if (c > 0) text += "  ";
      text += right(c) ? pad + line[c] : line[c] + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, text, "\n");
  }
  return out;
}

std::string MarkdownTable(const std::vector<std::string>& headers,
                          const std::vector<std::vector<std::string>>& rows,
                          const std::function<bool(size_t)>& right) {
  auto row_text = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) escaped.push_back(absl::StrReplaceAll(c, {{"|", "\\|"}}));
    return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
  };
  std::string out = row_text(headers);
  std::vector<std::string> rule;
  for (size_t c = 0; c < headers.size(); ++c) rule.push_back(right(c) ? "---:" : "---");
  absl::StrAppend(&out, "|", absl::StrJoin(rule, "|"), "|\n");
  for (const auto& row : rows) absl::StrAppend(&out, row_text(row));
  return out;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

template <typename T>
std::string CsvOptional(const std::optional<T>& v, const char* format) {
  return v ? absl::StrFormat(format, *v) : "";
}

template <typename T>
json JsonOptional(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
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
      "mean_val_nats_per_byte,delta,tau,params,params_change,params_warning,"
      "mean_train_seconds,device_class,pending_reason\n";
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
        CsvOptional(report.tau, "%.6f"),
        CsvOptional(row.params, "%d"),
        CsvOptional(row.params_change, "%.5f"),
        row.params_warning ? "true" : "false",
        CsvOptional(row.mean_train_seconds, "%.3f"),
        CsvField(report.device_class),
        CsvField(row.pending_reason)};
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

json ReportToJson(const Report& report) {
  json budget = json::object();
  if (report.budget.steps) budget["steps"] = *report.budget.steps;
  if (report.budget.minutes) budget["minutes"] = *report.budget.minutes;
  json rows = json::array();
  for (const ReportRow& row : report.rows) {
    rows.push_back({{"variant", row.variant},
                    {"verdict", VerdictName(row.verdict)},
                    {"verdict_text", row.VerdictText()},
                    {"seeds_finished", row.seeds_finished},
                    {"seeds_expected", row.seeds_expected},
                    {"losses", row.losses},
                    {"mean_val_nats_per_byte", JsonOptional(row.mean_loss)},
                    {"delta", JsonOptional(row.delta)},
                    {"delta_over_tau", JsonOptional(row.delta_over_tau)},
                    {"welch_t", JsonOptional(row.welch_t)},
                    {"params", JsonOptional(row.params)},
                    {"params_change", JsonOptional(row.params_change)},
                    {"params_warning", row.params_warning},
                    {"mean_train_seconds", JsonOptional(row.mean_train_seconds)},
                    {"pending_reason", row.pending_reason.empty() ? json(nullptr)
                                                                  : json(row.pending_reason)}});
  }
  json left_out = json::array();
  for (const LeftOutRun& r : report.left_out) {
    left_out.push_back({{"variant", r.variant}, {"seed", r.seed},
                        {"device_class", r.device_class}});
  }
  return {{"experiment", report.experiment},
          {"comparison", "equal_steps"},
          {"baseline", report.baseline},
          {"budget", budget},
          {"device_class", report.device_class},
          {"noise_floor", report.noise_floor},
          {"baseline_spread", JsonOptional(report.baseline_spread)},
          {"tau", JsonOptional(report.tau)},
          {"complete", report.Complete()},
          {"rows", rows},
          {"left_out", left_out},
          {"notes", report.notes}};
}

// ---- Equal time, combined, noise ------------------------------------------

namespace {

std::string Fixed(const std::optional<double>& v, const char* format) {
  return v ? absl::StrFormat(format, *v) : std::string(kNone);
}

std::string ParamsCell(const ReportRow& row) { return row.params ? Grouped(*row.params) : kNone; }

std::string ParamsChangeCell(const ReportRow& row) {
  if (!row.params_change) return kNone;
  std::string cell = absl::StrFormat("%+.1f %%", 100 * *row.params_change);
  if (row.params_warning) cell += " !";
  return cell;
}

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

// One line per reference point, or why there are none yet.
std::vector<std::string> CurveLines(const TimeReport& r) {
  std::vector<std::string> lines;
  if (r.curve.empty()) {
    lines.push_back(absl::StrCat("reference curve: no budget finished yet on ",
                                 r.device_class.empty() ? "any device class" : r.device_class,
                                 " (0 of ", r.curve_budgets, ")"));
    return lines;
  }
  lines.push_back(absl::StrFormat(
      "reference curve (%d of %d budgets, mean of each budget's seeds): R(t) is interpolated "
      "linearly in log time",
      static_cast<int>(r.curve.size()), r.curve_budgets));
  for (const CurvePoint& p : r.curve) {
    lines.push_back(absl::StrFormat("  %s: %.1f s, %.4f nats/byte (%d seed%s)",
                                    BudgetLabel(p.budget), p.seconds, p.loss,
                                    static_cast<int>(p.seed_losses.size()),
                                    p.seed_losses.size() == 1 ? "" : "s"));
  }
  return lines;
}

std::string TimeSummary(const TimeReport& r) {
  int compared = 0, pending = 0, extrapolated = 0;
  for (const TimeRow& row : r.rows) {
    if (row.verdict == Verdict::kPending) ++pending;
    else ++compared;
    extrapolated += row.extrapolated;
  }
  std::string s = absl::StrCat(compared, " variant(s) compared with the reference curve at equal "
                               "time");
  if (extrapolated > 0) absl::StrAppend(&s, ", ", extrapolated, " extrapolated");
  if (pending > 0) absl::StrAppend(&s, ", ", pending, " pending");
  absl::StrAppend(&s, " (Δ time = loss − R(t); a verdict needs |Δ| > τ)");
  return s;
}

std::vector<std::string> AllNotes(const TimeReport& r) {
  std::vector<std::string> notes = r.steps.notes;
  notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  return notes;
}

const std::vector<std::string>& TimeHeaders() {
  static const auto* h = new std::vector<std::string>{
      "variant", "seeds", "val nats/byte", "train s", "R(t)", "Δ time", "verdict", "params",
      "Δ params"};
  return *h;
}
bool TimeRightAligned(size_t c) { return c != 0 && c != 4 && c != 6; }

std::vector<std::string> TimeCells(const ReportRow& s, const TimeRow& t) {
  return {s.variant,
          absl::StrCat(s.seeds_finished, "/", s.seeds_expected),
          Fixed(s.mean_loss, "%.4f"),
          Fixed(s.mean_train_seconds, "%.1f"),
          ReferenceCell(t),
          Fixed(t.delta, "%+.4f"),
          t.VerdictText(),
          ParamsCell(s),
          ParamsChangeCell(s)};
}

const std::vector<std::string>& CombinedHeaders() {
  static const auto* h = new std::vector<std::string>{
      "variant", "seeds", "val nats/byte", "Δ steps", "at equal steps", "train s", "R(t)",
      "Δ time", "at equal time", "params", "Δ params"};
  return *h;
}
bool CombinedRightAligned(size_t c) { return c != 0 && c != 4 && c != 6 && c != 8; }

std::vector<std::string> CombinedCells(const ReportRow& s, const TimeRow& t) {
  return {s.variant,
          absl::StrCat(s.seeds_finished, "/", s.seeds_expected),
          Fixed(s.mean_loss, "%.4f"),
          Fixed(s.delta, "%+.4f"),
          s.VerdictText(),
          Fixed(s.mean_train_seconds, "%.1f"),
          ReferenceCell(t),
          Fixed(t.delta, "%+.4f"),
          t.VerdictText(),
          ParamsCell(s),
          ParamsChangeCell(s)};
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
      "mean_val_nats_per_byte,mean_train_seconds,reference_loss,delta,tau,extrapolated,"
      "span_ratio,params,device_class,pending_reason\n";
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
        CsvOptional(r.steps.tau, "%.6f"),
        t.extrapolated ? "true" : "false",
        t.reference_loss ? absl::StrFormat("%.4f", t.span_ratio) : "",
        CsvOptional(s.params, "%d"),
        CsvField(r.device_class),
        CsvField(t.pending_reason)};
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

std::string CombinedCsv(const TimeReport& r) {
  // The equal-steps CSV, each line extended with the equal-time columns.
  const std::vector<std::string> lines = absl::StrSplit(FormatReportCsv(r.steps), '\n');
  std::string out = absl::StrCat(
      lines[0], ",reference_loss,delta_time,delta_time_over_tau,verdict_time,extrapolated,"
      "span_ratio\n");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const TimeRow& t = r.rows[i];
    std::vector<std::string> fields = {
        lines[i + 1],
        CsvOptional(t.reference_loss, "%.6f"),
        CsvOptional(t.delta, "%.6f"),
        CsvOptional(t.delta_over_tau, "%.3f"),
        CsvField(VerdictName(t.verdict)),
        t.extrapolated ? "true" : "false",
        t.reference_loss ? absl::StrFormat("%.4f", t.span_ratio) : ""};
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

json BudgetJson(const Budget& b) {
  json j = json::object();
  if (b.steps) j["steps"] = *b.steps;
  if (b.minutes) j["minutes"] = *b.minutes;
  return j;
}

const std::vector<std::string>& NoiseHeaders() {
  static const auto* h = new std::vector<std::string>{
      "variant", "seeds", "spread", "std", "Welch t", "df", "seeds to resolve τ"};
  return *h;
}

std::string SeedsToResolveText(const NoiseRow& row) {
  if (row.more_than_max_seeds) return absl::StrCat(">", kMaxSeedsToResolve);
  return row.seeds_to_resolve ? absl::StrCat(*row.seeds_to_resolve) : std::string();
}

std::vector<std::string> NoiseCells(const NoiseRow& row) {
  std::string seeds = SeedsToResolveText(row);
  return {row.variant,
          absl::StrCat(row.seeds),
          Fixed(row.spread, "%.4f"),
          Fixed(row.stddev, "%.4f"),
          Fixed(row.welch_t, "%+.2f"),
          Fixed(row.welch_df, "%.1f"),
          seeds.empty() ? std::string(kNone) : seeds};
}

std::string NoiseTitle(const NoiseReport& n) {
  std::string title = absl::StrCat(n.experiment, " — noise (seed replicates per variant)");
  if (!n.device_class.empty()) absl::StrAppend(&title, ", device class ", n.device_class);
  return title;
}

std::string NoiseTauLine(const NoiseReport& n) {
  if (!n.tau) {
    return absl::StrFormat("τ used: not known until every baseline seed has finished (floor %.4f)",
                           n.noise_floor);
  }
  return absl::StrFormat(
      "τ used: %.4f nats/byte = max(floor %.4f, the baseline's spread %s)", *n.tau,
      n.noise_floor,
      n.baseline_spread ? absl::StrFormat("%.4f", *n.baseline_spread) : std::string(kNone));
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

json TimeReportToJson(const TimeReport& report, bool combined) {
  json j = ReportToJson(report.steps);
  j["comparison"] = combined ? "equal_steps_and_time" : "equal_time";
  json reference = json::array();
  for (const CurvePoint& p : report.curve) {
    reference.push_back({{"budget", BudgetJson(p.budget)},
                         {"seconds", p.seconds},
                         {"val_nats_per_byte", p.loss},
                         {"seeds", p.seed_losses.size()}});
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
                    {"delta_over_tau", JsonOptional(row.delta_over_tau)},
                    {"extrapolated", row.extrapolated},
                    {"span_ratio", row.reference_loss ? json(row.span_ratio) : json(nullptr)},
                    {"pending_reason", row.pending_reason.empty() ? json(nullptr)
                                                                  : json(row.pending_reason)}});
  }
  j["equal_time"] = {{"device_class", report.device_class},
                     {"curve_budgets", report.curve_budgets},
                     {"reference", reference},
                     {"rows", rows},
                     {"complete", report.Complete()},
                     {"notes", report.notes}};
  return j;
}

std::string FormatNoise(const NoiseReport& noise, ReportFormat format) {
  std::vector<std::vector<std::string>> rows;
  for (const NoiseRow& row : noise.rows) rows.push_back(NoiseCells(row));
  auto right = [](size_t c) { return c != 0; };
  switch (format) {
    case ReportFormat::kTable: {
      std::string out = absl::StrCat(NoiseTitle(noise), "\n", NoiseTauLine(noise), "\n\n",
                                     AlignedTable(NoiseHeaders(), rows, right));
      for (const std::string& note : noise.notes) absl::StrAppend(&out, "note: ", note, "\n");
      return out;
    }
    case ReportFormat::kMarkdown: {
      std::string out = absl::StrCat("**", NoiseTitle(noise), "**\n\n", NoiseTauLine(noise),
                                     "\n\n", MarkdownTable(NoiseHeaders(), rows, right));
      if (!noise.notes.empty()) absl::StrAppend(&out, "\n");
      for (const std::string& note : noise.notes) absl::StrAppend(&out, "- ", note, "\n");
      return out;
    }
    case ReportFormat::kCsv: {
      std::string out =
          "experiment,variant,seeds,spread,stddev,welch_t,welch_df,seeds_to_resolve,tau,"
          "device_class\n";
      for (const NoiseRow& row : noise.rows) {
        std::vector<std::string> fields = {
            CsvField(noise.experiment), CsvField(row.variant), absl::StrCat(row.seeds),
            CsvOptional(row.spread, "%.6f"), CsvOptional(row.stddev, "%.6f"),
            CsvOptional(row.welch_t, "%.4f"), CsvOptional(row.welch_df, "%.2f"),
            SeedsToResolveText(row), CsvOptional(noise.tau, "%.6f"),
            CsvField(noise.device_class)};
        absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
      }
      return out;
    }
    case ReportFormat::kJson: return NoiseToJson(noise).dump(2) + "\n";
  }
  CHECK(false) << "unknown ReportFormat";
  return "";
}

json NoiseToJson(const NoiseReport& noise) {
  json rows = json::array();
  for (const NoiseRow& row : noise.rows) {
    rows.push_back({{"variant", row.variant},
                    {"seeds", row.seeds},
                    {"spread", JsonOptional(row.spread)},
                    {"stddev", JsonOptional(row.stddev)},
                    {"welch_t", JsonOptional(row.welch_t)},
                    {"welch_df", JsonOptional(row.welch_df)},
                    {"seeds_to_resolve", JsonOptional(row.seeds_to_resolve)},
                    {"more_than_max_seeds", row.more_than_max_seeds}});
  }
  return {{"experiment", noise.experiment},
          {"baseline", noise.baseline},
          {"device_class", noise.device_class},
          {"noise_floor", noise.noise_floor},
          {"baseline_spread", JsonOptional(noise.baseline_spread)},
          {"tau", JsonOptional(noise.tau)},
          {"rows", rows},
          {"notes", noise.notes}};
}

}  // namespace smallem
