#include "server/report/report_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/text.h"

namespace smallem::report_internal {
namespace {

// Characters on screen, not bytes: τ, Δ and — are one column each.
size_t DisplayWidth(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string Grouped(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Fixed(const std::optional<double>& v, const char* format) {
  return v ? absl::StrFormat(format, *v) : std::string(kNone);
}

// Active parameters, and the total beside them when a mixture of experts
// makes them differ: "1,234,567 (total 3,456,789)".
std::string ParamsCell(const ReportRow& row) {
  if (!row.params) return kNone;
  if (!row.total_params) return Grouped(*row.params);
  return Grouped(*row.params) + " (total " + Grouped(*row.total_params) + ")";
}

std::string ParamsChangeCell(const ReportRow& row) {
  if (!row.params_change) return kNone;
  std::string cell = absl::StrFormat("%+.1f %%", 100 * *row.params_change);
  if (row.params_warning) cell += " !";
  return cell;
}

const std::vector<std::string>& CostHeaders() {
  static const auto* h = new std::vector<std::string>{"KV B/token", "train tok/s", "gen tok/s"};
  return *h;
}

std::vector<std::string> CostCells(const ReportRow& row) {
  return {row.kv_cache_bytes_per_token ? Grouped(*row.kv_cache_bytes_per_token) : kNone,
          Fixed(row.mean_tokens_per_s, "%.0f"), Fixed(row.mean_generation_tokens_per_s, "%.1f")};
}

std::vector<std::string> CostCsvFields(const ReportRow& row) {
  return {CsvOptional(row.kv_cache_bytes_per_token, "%d"),
          CsvOptional(row.mean_tokens_per_s, "%.1f"),
          CsvOptional(row.mean_generation_tokens_per_s, "%.2f")};
}

void AddCostJson(const ReportRow& row, nlohmann::json& out) {
  out["kv_cache_bytes_per_token"] = JsonOptional(row.kv_cache_bytes_per_token);
  out["mean_tokens_per_s"] = JsonOptional(row.mean_tokens_per_s);
  out["mean_generation_tokens_per_s"] = JsonOptional(row.mean_generation_tokens_per_s);
}

std::string NoiseLine(const Report& r) {
  if (!r.noise.sigma) {
    return absl::StrFormat(
        "noise: not measured (no arm has two finished seeds): no row is decided; two seeds "
        "per arm measure it (floor %.4f nats/byte)",
        r.noise_floor);
  }
  int arms = 0;
  for (const ArmNoise& arm : r.noise.arms) arms += arm.stddev.has_value();
  return absl::StrFormat(
      "noise: σ = %.4f nats/byte pooled over %d arm%s (df %d); each row's τ = max(floor %.4f, "
      "t₀.₉₇₅·SE)",
      *r.noise.sigma, arms, arms == 1 ? "" : "s", r.noise.df, r.noise_floor);
}

std::string IntervalCell(const std::optional<double>& low, const std::optional<double>& high) {
  if (!low || !high) return kNone;
  return absl::StrFormat("[%+.4f, %+.4f]", *low, *high);
}

std::string Summary(const Report& r) {
  int compared = 0, pending = 0, diverged = 0;
  for (const ReportRow& row : r.rows) {
    if (row.verdict == Verdict::kPending) ++pending;
    else if (row.verdict == Verdict::kDiverged) ++diverged;
    else if (row.verdict != Verdict::kBaseline && row.verdict != Verdict::kRefused) ++compared;
  }
  std::string s =
      absl::StrCat(CountedNoun(compared, "variant", "variants"), " compared with ", r.baseline);
  if (pending > 0) absl::StrAppend(&s, ", ", pending, " pending");
  if (diverged > 0) absl::StrAppend(&s, ", ", diverged, " diverged");
  absl::StrAppend(&s, absl::StrFormat(
                         " (lower is better; better/worse: |Δ| > the row's τ; equivalent: the "
                         "90 %% interval inside ±%.4f; undecided: neither)",
                         r.noise_floor));
  return s;
}

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

nlohmann::json BudgetJson(const Budget& b) {
  nlohmann::json j = nlohmann::json::object();
  if (b.steps) j["steps"] = *b.steps;
  if (b.minutes) j["minutes"] = *b.minutes;
  return j;
}

}  // namespace smallem::report_internal
