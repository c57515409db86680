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
