#include "server/analysis/noise.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_format.h"
#include "base/check.h"
#include "server/analysis/stats.h"

namespace smallem {
namespace {

}  // namespace

double StudentT975(int df) {
  CHECK_GE(df, 1);
  static constexpr std::array<double, 30> kTable = {
      12.7062047, 4.3026527, 3.1824463, 2.7764451, 2.5705818, 2.4469119, 2.3646243, 2.3060041,
      2.2621572,  2.2281389, 2.2009852, 2.1788128, 2.1603687, 2.1447867, 2.1314495, 2.1199053,
      2.1098155,  2.1009220, 2.0930241, 2.0859634, 2.0796138, 2.0738731, 2.0686576, 2.0638986,
      2.0595386,  2.0555294, 2.0518305, 2.0484071, 2.0452296, 2.0422725};
  if (df <= 30) return kTable[df - 1];
  // Cornish–Fisher expansion of the t quantile around the normal one.
  const double z = 1.959963984540054, n = df;
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * n * n * n);
}

std::optional<int> SeedsToResolve(double s_a, double s_b, double tau) {
  CHECK(tau > 0 && s_a >= 0 && s_b >= 0);
  const double s_pooled = std::sqrt((s_a * s_a + s_b * s_b) / 2);
  for (int n = 2; n <= kMaxSeedsToResolve; ++n) {
    if (StudentT975(2 * n - 2) * s_pooled * std::sqrt(2.0 / n) < tau) return n;
  }
  return std::nullopt;
}

NoiseReport AnalyzeNoise(const Report& report) {
  NoiseReport out;
  out.experiment = report.experiment;
  out.baseline = report.baseline;
  out.device_class = report.device_class;
  out.noise_floor = report.noise_floor;
  out.baseline_spread = report.baseline_spread;
  out.tau = report.tau;

  const std::vector<double>* base = nullptr;
  for (const ReportRow& row : report.rows) {
    if (row.variant == report.baseline) base = &row.losses;
  }
  bool any_welch = false;
  for (const ReportRow& row : report.rows) {
    NoiseRow n;
    n.variant = row.variant;
    n.seeds = static_cast<int>(row.losses.size());
    if (row.losses.size() >= 2) {
      const auto [lo, hi] = std::minmax_element(row.losses.begin(), row.losses.end());
      n.spread = *hi - *lo;
      n.stddev = std::sqrt(SampleVariance(row.losses));
    }
    const bool enough = base != nullptr && row.losses.size() >= 3 && base->size() >= 3;
    if (enough) {
      const double s_b = std::sqrt(SampleVariance(*base));
      if (row.variant != report.baseline) {
        if (const std::optional<WelchResult> welch = Welch(row.losses, *base)) {
          n.welch_t = welch->t;
          n.welch_df = welch->df;
          any_welch = true;
        }
      }
      if (report.tau) {
        n.seeds_to_resolve = SeedsToResolve(*n.stddev, s_b, *report.tau);
        n.more_than_max_seeds = !n.seeds_to_resolve.has_value();
      }
    }
    out.rows.push_back(std::move(n));
  }

  const size_t base_seeds = base != nullptr ? base->size() : 0;
  if (base_seeds < 3) {
    out.notes.push_back(absl::StrFormat(
        "Welch's t and the seeds needed to resolve τ need three or more seeds per arm (the "
        "baseline has %d finished).",
        static_cast<int>(base_seeds)));
  } else if (any_welch) {
    out.notes.push_back(
        "|t| above about 2 (the 0.975 quantile of Student's t at the df shown) means the "
        "difference is unlikely to be seed noise alone; τ still decides the verdict.");
  }
  return out;
}

}  // namespace smallem
