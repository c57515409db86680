// Noise: how much the seed alone moves each variant's loss, and whether the
// seeds run are enough to resolve the noise floor (docs/equal-time.md,
// docs/equal-time.md § Noise). Computed from an equal-steps Report, i.e.
// from the per-seed losses of the arms on one device class, and its noise
// model (server/analysis/pooled_noise.h: σ pooled over every arm with ≥ 2
// seeds, the F test of each arm against the others).
//
// Per variant with two or more finished seeds:
//   spread  = max − min of its per-seed losses (for people; no rule uses it);
//   stddev  = s, the sample standard deviation (n − 1 in the denominator);
//   F       = s² / s_rest² and its two-sided p (an arm departing from σ).
// With three or more seeds in both the variant's and the baseline's arm:
//   Welch's t = (mean V − mean B) / sqrt(s_V²/n_V + s_B²/n_B), with the
//     Welch–Satterthwaite degrees of freedom
//     ν = (a + b)² / (a²/(n_V − 1) + b²/(n_B − 1)), a = s_V²/n_V, b = s_B²/n_B.
// With two or more seeds in both:
//   seeds to resolve the floor = the smallest n ≥ 2 for which the 95 %
//     confidence interval of a difference of two means of n seeds each is
//     narrower than the floor on either side:
//     t_{0.975, 2n−2} · s_p · sqrt(2/n) < floor, with the pooled
//     s_p² = (s_V² + s_B²) / 2 (for the baseline's own row, s_p = s_B).
//     Searched up to kMaxSeedsToResolve; beyond it the row says so. Its
//     uncertainty: the same search at the ends of the 95 % interval of s_p,
//     s_p·√(d/χ²_{0.975, d}) … s_p·√(d/χ²_{0.025, d}), d = (n_V − 1) + (n_B − 1)
//     (n_B − 1 on the baseline's row), so that two seeds give a range.
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_NOISE_REPORT_H_
#define SMALLEM_SERVER_ANALYSIS_NOISE_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "server/analysis/equal_steps.h"

namespace smallem {

inline constexpr int kMaxSeedsToResolve = 1000;

struct NoiseRow {
  std::string variant;
  int seeds = 0;                 // finished on the compared class
  std::optional<double> spread;  // max − min; ≥ 2 seeds
  std::optional<double> stddev;  // sample standard deviation; ≥ 2 seeds
  std::optional<double> f_ratio; // ArmNoise::f_ratio
  std::optional<int> f_df_rest;
  std::optional<double> f_p;
  bool departs = false;          // F test at 1 %
  // ≥ 3 seeds in this arm and in the baseline's (not on the baseline's row
  // for Welch).
  std::optional<double> welch_t;
  std::optional<double> welch_df;
  // Seeds per arm that would resolve the floor; set with ≥ 2 seeds per arm.
  std::optional<int> seeds_to_resolve;
  bool more_than_max_seeds = false;  // the search ran past kMaxSeedsToResolve
  // Its range over the 95 % interval of s_p (low ≤ seeds_to_resolve ≤ high);
  // high unset with high_beyond_max.
  std::optional<int> seeds_to_resolve_low;
  std::optional<int> seeds_to_resolve_high;
  bool high_beyond_max = false;
};

struct NoiseReport {
  std::string experiment;
  std::string baseline;
  std::string device_class;
  double noise_floor = 0.002;
  std::optional<double> sigma;  // pooled σ (NoiseModel::sigma)
  int df = 0;                   // its degrees of freedom
  std::vector<NoiseRow> rows;   // the report's order (the baseline first)
  std::vector<std::string> notes;
};

// The noise section for `report` (any of its rows, pending ones with the
// seeds they have).
NoiseReport AnalyzeNoise(const Report& report);

// The 0.975 quantile of Student's t with `df` ≥ 1 degrees of freedom
// (StudentTQuantile, server/analysis/distributions.h).
double StudentT975(int df);

// The smallest n ≥ 2 with StudentT975(2n − 2) · s_p · sqrt(2/n) < target,
// where s_p = sqrt((s_a² + s_b²)/2); nullopt when none up to
// kMaxSeedsToResolve. REQUIRES: target > 0, s_a, s_b ≥ 0.
std::optional<int> SeedsToResolve(double s_a, double s_b, double target);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_NOISE_REPORT_H_
