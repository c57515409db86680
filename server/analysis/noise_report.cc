#include "server/analysis/noise_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "base/check.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"

namespace smallem {

double StudentT975(int df) {
  CHECK_GE(df, 1);
  return StudentTQuantile(0.975, df);
}

std::optional<int> SeedsToResolve(double s_a, double s_b, double target) {
  CHECK(target > 0 && s_a >= 0 && s_b >= 0);
  const double s_pooled = std::sqrt((s_a * s_a + s_b * s_b) / 2);
  for (int n = 2; n <= kMaxSeedsToResolve; ++n) {
    if (StudentT975(2 * n - 2) * s_pooled * std::sqrt(2.0 / n) < target) return n;
  }
  return std::nullopt;
}

NoiseReport AnalyzeNoise(const Report& report) {
  NoiseReport out;
  out.experiment = report.experiment;
  out.baseline = report.baseline;
  out.device_class = report.device_class;
  out.noise_floor = report.noise_floor;
  out.sigma = report.noise.sigma;
  out.df = report.noise.df;

  const std::vector<double>* base = nullptr;
  for (const ReportRow& row : report.rows) {
    if (row.variant == report.baseline) base = &row.losses;
  }
  bool any_welch = false;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ReportRow& row = report.rows[i];
    NoiseRow n;
    n.variant = row.variant;
    n.seeds = static_cast<int>(row.losses.size());
    if (row.losses.size() >= 2) {
      const auto [lo, hi] = std::minmax_element(row.losses.begin(), row.losses.end());
      n.spread = *hi - *lo;
      n.stddev = std::sqrt(SampleVariance(row.losses));
    }
    if (i < report.noise.arms.size()) {
      const ArmNoise& arm = report.noise.arms[i];
      n.f_ratio = arm.f_ratio;
      n.f_df_rest = arm.f_df_rest;
      n.f_p = arm.f_p;
      n.departs = arm.departs;
    }
    if (base != nullptr && row.losses.size() >= 3 && base->size() >= 3 &&
        row.variant != report.baseline) {
      if (const std::optional<WelchResult> welch = Welch(row.losses, *base)) {
        n.welch_t = welch->t;
        n.welch_df = welch->df;
        any_welch = true;
      }
    }
    if (base != nullptr && row.losses.size() >= 2 && base->size() >= 2) {
      const double s_b = std::sqrt(SampleVariance(*base));
      n.seeds_to_resolve = SeedsToResolve(*n.stddev, s_b, report.noise_floor);
      n.more_than_max_seeds = !n.seeds_to_resolve.has_value();
      // Both arms scaled by one factor scale s_p by it.
      const double d = row.variant == report.baseline
                           ? static_cast<double>(base->size() - 1)
                           : static_cast<double>(row.losses.size() + base->size() - 2);
      const double low = std::sqrt(d / ChiSquaredQuantile(0.975, d));
      const double high = std::sqrt(d / ChiSquaredQuantile(0.025, d));
      n.seeds_to_resolve_low = SeedsToResolve(*n.stddev * low, s_b * low, report.noise_floor);
      n.seeds_to_resolve_high = SeedsToResolve(*n.stddev * high, s_b * high, report.noise_floor);
      n.high_beyond_max = !n.seeds_to_resolve_high.has_value();
    }
    out.rows.push_back(std::move(n));
  }

  if (!out.sigma) {
    out.notes.push_back(
        "No arm has two finished seeds: the noise was not measured, so every τ is the floor.");
  }
  for (const NoiseRow& row : out.rows) {
    if (!row.departs) continue;
    out.notes.push_back(absl::StrFormat(
        "%s: s = %.4f departs from the others' pooled noise (F = %.2f, p = %.4f < %.2f); the "
        "pooled σ may misstate its noise, and Welch's standard error (≥ 3 seeds in both arms) "
        "does not assume it.",
        row.variant, *row.stddev, *row.f_ratio, *row.f_p, kVarianceTestLevel));
  }
  const size_t base_seeds = base != nullptr ? base->size() : 0;
  if (base_seeds < 2) {
    out.notes.push_back(absl::StrFormat(
        "The seeds needed to resolve the floor need two or more seeds per arm, Welch's t three "
        "(the baseline has %d finished).",
        static_cast<int>(base_seeds)));
  } else if (base_seeds < 3) {
    out.notes.push_back(
        "Welch's t needs three or more seeds per arm; from two, the seeds to resolve the floor "
        "are uncertain: the range beside them spans the 95 % interval of s.");
  } else if (any_welch) {
    out.notes.push_back(
        "|t| above the 0.975 quantile of Student's t at the df shown means the difference is "
        "unlikely to be seed noise alone; the row's τ decides the verdict.");
  }
  return out;
}

}  // namespace smallem
