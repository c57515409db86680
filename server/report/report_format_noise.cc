// The noise section in every format (server/report/report_format.h).
#include "server/report/report_format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "nlohmann/json.hpp"
#include "server/report/report_text.h"

namespace smallem {
namespace {

using nlohmann::json;
using report_internal::kNone;
using report_internal::Fixed;
using report_internal::AlignedTable;
using report_internal::MarkdownTable;
using report_internal::CsvField;
using report_internal::CsvOptional;
using report_internal::JsonOptional;

const std::vector<std::string>& NoiseHeaders() {
  static const auto* h = new std::vector<std::string>{
      "variant", "seeds", "spread", "s", "F vs rest", "p (F)", "Welch t", "df",
      "seeds to resolve floor (95 % range)"};
  return *h;
}

std::string SeedsToResolveText(const NoiseRow& row) {
  if (row.more_than_max_seeds) return absl::StrCat(">", kMaxSeedsToResolve);
  return row.seeds_to_resolve ? absl::StrCat(*row.seeds_to_resolve) : std::string();
}

// "4 (3–12)": the number and its range over the 95 % interval of s.
std::string SeedsToResolveCell(const NoiseRow& row) {
  std::string text = SeedsToResolveText(row);
  if (text.empty()) return kNone;
  if (!row.seeds_to_resolve_low) return text;
  const std::string high = row.high_beyond_max ? absl::StrCat(">", kMaxSeedsToResolve)
                                               : absl::StrCat(*row.seeds_to_resolve_high);
  return absl::StrCat(text, " (", *row.seeds_to_resolve_low, "–", high, ")");
}

std::vector<std::string> NoiseCells(const NoiseRow& row) {
  return {row.variant,
          absl::StrCat(row.seeds),
          Fixed(row.spread, "%.4f"),
          Fixed(row.stddev, "%.4f"),
          Fixed(row.f_ratio, "%.2f"),
          row.f_p ? absl::StrFormat("%.3f%s", *row.f_p, row.departs ? " !" : "") : kNone,
          Fixed(row.welch_t, "%+.2f"),
          Fixed(row.welch_df, "%.1f"),
          SeedsToResolveCell(row)};
}

std::string NoiseTitle(const NoiseReport& n) {
  std::string title = absl::StrCat(n.experiment, " — noise (seed replicates per variant)");
  if (!n.device_class.empty()) absl::StrAppend(&title, ", device class ", n.device_class);
  return title;
}

std::string NoiseSigmaLine(const NoiseReport& n) {
  if (!n.sigma) {
    return absl::StrFormat(
        "pooled σ: not measured (no arm has two finished seeds): no row is decided; two seeds "
        "per arm measure it (floor %.4f)",
        n.noise_floor);
  }
  return absl::StrFormat(
      "pooled σ = %.4f nats/byte (df %d) over every arm with two or more seeds; F test of each "
      "arm's s against the others at %.0f %%; floor %.4f",
      *n.sigma, n.df, 100 * kVarianceTestLevel, n.noise_floor);
}

}  // namespace

std::string FormatNoise(const NoiseReport& noise, ReportFormat format) {
  std::vector<std::vector<std::string>> rows;
  for (const NoiseRow& row : noise.rows) rows.push_back(NoiseCells(row));
  auto right = [](size_t c) { return c != 0; };
  switch (format) {
    case ReportFormat::kTable: {
      std::string out = absl::StrCat(NoiseTitle(noise), "\n", NoiseSigmaLine(noise), "\n\n",
                                     AlignedTable(NoiseHeaders(), rows, right));
      for (const std::string& note : noise.notes) absl::StrAppend(&out, "note: ", note, "\n");
      return out;
    }
    case ReportFormat::kMarkdown: {
      std::string out = absl::StrCat("**", NoiseTitle(noise), "**\n\n", NoiseSigmaLine(noise),
                                     "\n\n", MarkdownTable(NoiseHeaders(), rows, right));
      if (!noise.notes.empty()) absl::StrAppend(&out, "\n");
      for (const std::string& note : noise.notes) absl::StrAppend(&out, "- ", note, "\n");
      return out;
    }
    case ReportFormat::kCsv: {
      std::string out =
          "experiment,variant,seeds,spread,stddev,f_ratio,f_p,departs,welch_t,welch_df,"
          "seeds_to_resolve,pooled_sigma,pooled_df,device_class,seeds_to_resolve_low,"
          "seeds_to_resolve_high\n";
      for (const NoiseRow& row : noise.rows) {
        std::vector<std::string> fields = {
            CsvField(noise.experiment), CsvField(row.variant), absl::StrCat(row.seeds),
            CsvOptional(row.spread, "%.6f"), CsvOptional(row.stddev, "%.6f"),
            CsvOptional(row.f_ratio, "%.4f"), CsvOptional(row.f_p, "%.5f"),
            row.departs ? "true" : "false",
            CsvOptional(row.welch_t, "%.4f"), CsvOptional(row.welch_df, "%.2f"),
            SeedsToResolveText(row), CsvOptional(noise.sigma, "%.6f"), absl::StrCat(noise.df),
            CsvField(noise.device_class), CsvOptional(row.seeds_to_resolve_low, "%d"),
            row.high_beyond_max ? absl::StrCat(">", kMaxSeedsToResolve)
                                : CsvOptional(row.seeds_to_resolve_high, "%d")};
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
                    {"f_ratio", JsonOptional(row.f_ratio)},
                    {"f_df_rest", JsonOptional(row.f_df_rest)},
                    {"f_p", JsonOptional(row.f_p)},
                    {"departs", row.departs},
                    {"welch_t", JsonOptional(row.welch_t)},
                    {"welch_df", JsonOptional(row.welch_df)},
                    {"seeds_to_resolve", JsonOptional(row.seeds_to_resolve)},
                    {"more_than_max_seeds", row.more_than_max_seeds},
                    {"seeds_to_resolve_low", JsonOptional(row.seeds_to_resolve_low)},
                    {"seeds_to_resolve_high", JsonOptional(row.seeds_to_resolve_high)},
                    {"high_beyond_max", row.high_beyond_max}});
  }
  return {{"experiment", noise.experiment},
          {"baseline", noise.baseline},
          {"device_class", noise.device_class},
          {"noise_floor", noise.noise_floor},
          {"pooled_sigma", JsonOptional(noise.sigma)},
          {"pooled_df", noise.df},
          {"rows", rows},
          {"notes", noise.notes}};
}

}  // namespace smallem
