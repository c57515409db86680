#include "server/report_format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
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
  std::vector<std::vector<std::string>> lines = {Headers()};
  for (const ReportRow& row : report.rows) lines.push_back(Cells(row));
  std::vector<size_t> width(Headers().size(), 0);
  for (const auto& line : lines) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], DisplayWidth(line[c]));
  }
  std::string out = absl::StrCat(Title(report), "\n", NoiseLine(report), "\n\n");
  for (const auto& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - DisplayWidth(line[c]), ' ');
      if (c > 0) text += "  ";
      text += RightAligned(c) ? pad + line[c] : line[c] + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, text, "\n");
  }
  absl::StrAppend(&out, "\n", Summary(report), ".\n");
  for (const std::string& note : report.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

std::string FormatReportMarkdown(const Report& report) {
  std::string out = absl::StrCat("**", Title(report), "**\n\n", NoiseLine(report), "\n\n");
  auto row_text = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) escaped.push_back(absl::StrReplaceAll(c, {{"|", "\\|"}}));
    return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
  };
  absl::StrAppend(&out, row_text(Headers()));
  std::vector<std::string> rule;
  for (size_t c = 0; c < Headers().size(); ++c) rule.push_back(RightAligned(c) ? "---:" : "---");
  absl::StrAppend(&out, "|", absl::StrJoin(rule, "|"), "|\n");
  for (const ReportRow& row : report.rows) absl::StrAppend(&out, row_text(Cells(row)));
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

}  // namespace smallem
