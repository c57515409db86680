// Rendering a comparison Report for people and for programs:
//   table     aligned text for a terminal (the default of `smallemctl report`)
//   markdown  a GitHub table, to paste into notes or an issue
//   csv       one line per variant, full precision, RFC 4180 quoting
//   json      the whole report, machine-readable
// Every format carries the same facts: the pooled noise, each variant's mean
// loss, Δ, its 95 % interval, the row's threshold τ and how it was obtained,
// the verdict and parameter counts, the pending rows and the notes
// (warnings, runs left out).
//
// Three reports share these formats (docs/equal-time.md):
//   FormatReport          equal steps: Δ = mean(V) − mean(B)
//   FormatTimeReport      equal time: t, R(t), Δt = mean(V) − R(t)
//   FormatCombinedReport  both side by side (a variant can win per step and
//                         lose per minute)
// and the noise section (FormatNoise): pooled σ, per-arm s and its F test,
// Welch's t and the seeds that would resolve the floor.
//
// Pure functions of their arguments.
#ifndef SMALLEM_SERVER_REPORT_REPORT_FORMAT_H_
#define SMALLEM_SERVER_REPORT_REPORT_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/analysis/equal_steps.h"
#include "server/analysis/noise_report.h"
#include "server/analysis/equal_time.h"

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
// N} or {"minutes": M}), device_class, noise_floor, noise_model
// (NoiseModelJson), complete, family (variants, alpha, holm,
// expected_false_verdicts: variants·alpha, null with holm), rows[] (variant,
// verdict, verdict_text,
// seeds_finished, seeds_expected, losses, mean_val_nats_per_byte, delta,
// se_method, se, df, t_quantile, ci_low, ci_high, tau, alpha (the level of
// better/worse: 0.05, or the row's Holm level), delta_over_tau (Δ/τ,
// with Δ's sign), tost_low, tost_high (the 90 % interval), missable_effect,
// seeds_to_decide, decide_beyond_max (undecided rows), welch_t, welch_df, params, params_change, params_warning,
// mean_train_seconds, pending_reason), left_out[] (variant, seed,
// device_class), notes[]. Absent values are null.
nlohmann::json ReportToJson(const Report& report);
// sigma, df, variance_test_level, arms[] (variant, seeds, stddev, f_ratio,
// f_df [arm, rest], f_p, departs).
nlohmann::json NoiseModelJson(const NoiseModel& noise);

// Equal time only. Table/markdown: title, τ line, the reference curve's
// points, one row per variant (seeds, val nats/byte, train s, R(t) —
// "(extrapolated ×0.82)" outside the curve —, Δ time, verdict, params), the
// notes of both comparisons. CSV columns: experiment, variant, verdict,
// delta_over_tau, seeds_finished, seeds_expected, mean_val_nats_per_byte,
// mean_train_seconds, reference_loss, delta, tau, extrapolated, span_ratio,
// params, device_class, pending_reason. JSON: TimeReportToJson.
std::string FormatTimeReport(const TimeReport& report, ReportFormat format);

// Δ at steps and Δ at time side by side. CSV: the equal-steps columns, then
// reference_loss, delta_time, delta_time_over_tau, verdict_time,
// extrapolated, span_ratio. JSON: TimeReportToJson(report, true).
std::string FormatCombinedReport(const TimeReport& report, ReportFormat format);

// ReportToJson(report.steps) with "comparison" set to "equal_time" (or
// "equal_steps_and_time" when `combined`) and an "equal_time" object:
// device_class, curve_budgets, reference[] (budget, seconds, val_nats_per_byte,
// seeds), rows[] (variant, verdict, verdict_text, mean_train_seconds,
// mean_val_nats_per_byte, reference_loss, delta, delta_over_tau, extrapolated,
// span_ratio, pending_reason), complete, notes[].
nlohmann::json TimeReportToJson(const TimeReport& report, bool combined = false);

// The noise section. Table/markdown: the pooled σ line, one row per variant
// (seeds, spread, s, F against the other arms and its p — " !" when it
// departs —, Welch t, df, seeds to resolve the floor), notes. CSV columns:
// experiment, variant, seeds, spread, stddev, f_ratio, f_p, departs,
// welch_t, welch_df, seeds_to_resolve (">1000" past the search),
// pooled_sigma, pooled_df, device_class, seeds_to_resolve_low,
// seeds_to_resolve_high (its range over the 95 % interval of s).
std::string FormatNoise(const NoiseReport& noise, ReportFormat format);
// Keys: experiment, baseline, device_class, noise_floor, pooled_sigma,
// pooled_df, rows[] (variant, seeds, spread, stddev, f_ratio, f_df_rest, f_p,
// departs, welch_t, welch_df, seeds_to_resolve, more_than_max_seeds,
// seeds_to_resolve_low, seeds_to_resolve_high, high_beyond_max),
// notes[].
nlohmann::json NoiseToJson(const NoiseReport& noise);

}  // namespace smallem

#endif  // SMALLEM_SERVER_REPORT_REPORT_FORMAT_H_
