// Rendering a comparison Report for people and for programs:
//   table     aligned text for a terminal (the default of `smallemctl report`)
//   markdown  a GitHub table, to paste into notes or an issue
//   csv       one line per variant, full precision, RFC 4180 quoting
//   json      the whole report, machine-readable
// Every format carries the same facts: the noise threshold and how it was
// obtained, each variant's mean loss, Δ, verdict and parameter counts, the
// pending rows and the notes (warnings, runs left out).
//
// Pure functions of their arguments.
#ifndef SMALLEM_SERVER_REPORT_FORMAT_H_
#define SMALLEM_SERVER_REPORT_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/comparator.h"

namespace smallem {

enum class ReportFormat { kTable, kMarkdown, kCsv, kJson };

// "table", "markdown", "csv" or "json"; anything else is InvalidArgument
// naming the choices.
absl::StatusOr<ReportFormat> ParseReportFormat(std::string_view name);

// The report in `format`, ending with a newline.
std::string FormatReport(const Report& report, ReportFormat format);

std::string FormatReportTable(const Report& report);
std::string FormatReportMarkdown(const Report& report);
std::string FormatReportCsv(const Report& report);
// Keys: experiment, comparison ("equal_steps"), baseline, budget ({"steps":
// N} or {"minutes": M}), device_class, noise_floor, baseline_spread, tau
// (null until the baseline is complete), complete, rows[] (variant, verdict,
// verdict_text, seeds_finished, seeds_expected, losses, mean_val_nats_per_byte,
// delta, delta_over_tau, welch_t, params, params_change, params_warning,
// mean_train_seconds, pending_reason), left_out[] (variant, seed,
// device_class), notes[]. Absent values are null.
nlohmann::json ReportToJson(const Report& report);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_FORMAT_H_
