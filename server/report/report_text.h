// Internal to the report renderers (server/report/report_format*.cc): the cells,
// tables and field encodings the equal-steps, equal-time and noise reports
// share, so that every format writes a value the same way in every report.
// Pure functions.
#ifndef SMALLEM_SERVER_REPORT_REPORT_TEXT_H_
#define SMALLEM_SERVER_REPORT_REPORT_TEXT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "server/analysis/equal_steps.h"
#include "runspec/run_spec.h"

namespace smallem::report_internal {

// What an empty cell shows.
inline constexpr char kNone[] = "—";

// 1234567 → "1,234,567".
std::string Grouped(int64_t n);
// `v` in printf `format`, or kNone when unset.
std::string Fixed(const std::optional<double>& v, const char* format);
// The parameter count, grouped, and its change against the baseline
// ("+2.5 %", with " !" past the warning fraction); kNone when unknown.
std::string ParamsCell(const ReportRow& row);
std::string ParamsChangeCell(const ReportRow& row);
// What a row's runs cost: the cache bytes per token, training and generation
// tokens/s — headers, cells (kNone when unknown), CSV header and fields, and
// JSON members, the same three in every report, after its other columns.
const std::vector<std::string>& CostHeaders();
std::vector<std::string> CostCells(const ReportRow& row);
inline constexpr char kCostCsvHeader[] =
    "kv_cache_bytes_per_token,mean_tokens_per_s,mean_generation_tokens_per_s";
std::vector<std::string> CostCsvFields(const ReportRow& row);
void AddCostJson(const ReportRow& row, nlohmann::json& out);

// The equal-steps report's noise line ("noise: σ = … pooled over … arms
// (df …); each row's τ = …") and summary sentence (no final period); the
// equal-time report repeats both.
std::string NoiseLine(const Report& r);
// A 95 % interval: "[-0.0130, -0.0070]", or kNone.
std::string IntervalCell(const std::optional<double>& low, const std::optional<double>& high);
// A comparison's four cells, "Δ", "95 % CI", "τ", "verdict", appended to
// `cells`: the same for a row at equal steps (ReportRow) and at equal time
// (TimeRow), which both carry delta, ci_low, ci_high, tau and VerdictText().
template <typename Row>
void AppendComparisonCells(const Row& row, std::vector<std::string>& cells) {
  cells.push_back(Fixed(row.delta, "%+.4f"));
  cells.push_back(IntervalCell(row.ci_low, row.ci_high));
  cells.push_back(Fixed(row.tau, "%.4f"));
  cells.push_back(row.VerdictText());
}
std::string Summary(const Report& r);

// Aligned text columns, two spaces apart, each line ending with "\n";
// `right(c)` says which columns are right-aligned.
std::string AlignedTable(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::function<bool(size_t)>& right);
// A GitHub markdown table ('|' in cells escaped), alignment as above.
std::string MarkdownTable(const std::vector<std::string>& headers,
                          const std::vector<std::vector<std::string>>& rows,
                          const std::function<bool(size_t)>& right);

// `s` as an RFC 4180 field: quoted when it holds a comma, quote or newline.
std::string CsvField(const std::string& s);

// `v` in printf `format`, or an empty field when unset.
template <typename T>
std::string CsvOptional(const std::optional<T>& v, const char* format) {
  return v ? absl::StrFormat(format, *v) : "";
}

// `v`, or null when unset.
template <typename T>
nlohmann::json JsonOptional(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// {"steps": N} or {"minutes": M}.
nlohmann::json BudgetJson(const Budget& b);

}  // namespace smallem::report_internal

#endif  // SMALLEM_SERVER_REPORT_REPORT_TEXT_H_
