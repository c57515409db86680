// The noise model of a comparison (docs/equal-time.md, docs/equal-time.md
// § Formulas): how much the seed alone moves the loss, pooled over every arm
// with two or more finished seeds on the compared device class, and the
// standard error, interval and threshold of one difference of means.
//
//   σ² = Σ (nᵢ − 1)·sᵢ² / Σ (nᵢ − 1)        pooled, df = Σ (nᵢ − 1)
//   F test of an arm: F = sᵢ² / s_rest², s_rest pooled over the other arms,
//     two-sided at 1 % against F(nᵢ − 1, df_rest): the arm's s departs from σ.
//   A difference Δ = mean(V) − mean(B):
//     Welch  (both arms ≥ 3 seeds and some variance):
//            SE = √(s_V²/n_V + s_B²/n_B), ν = Welch–Satterthwaite;
//     pooled (otherwise, when σ is measured):
//            SE = σ·√(1/n_V + 1/n_B), ν = df of σ;
//     none   (no arm has two seeds): no SE, τ = floor.
//   t = t₀.₉₇₅(ν); 95 % interval Δ ± t·SE; τ_row = max(floor, t·SE).
//
// Thread-safety: pure functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_POOLED_NOISE_H_
#define SMALLEM_SERVER_ANALYSIS_POOLED_NOISE_H_

#include <optional>
#include <string>
#include <vector>

namespace smallem {

// The two-sided level of the F test that flags an arm.
inline constexpr double kVarianceTestLevel = 0.01;

// One arm as the noise model sees it.
struct ArmNoise {
  std::string name;
  int seeds = 0;
  std::optional<double> stddev;   // s, ≥ 2 seeds
  // The F test against the other arms pooled; set when this arm has ≥ 2
  // seeds and the others have some degrees of freedom and variance.
  std::optional<double> f_ratio;  // sᵢ² / s_rest²
  std::optional<int> f_df_rest;   // df of s_rest
  std::optional<double> f_p;      // two-sided p value
  bool departs = false;           // f_p < kVarianceTestLevel
};

struct NoiseModel {
  std::optional<double> sigma;  // pooled σ; set when df > 0
  int df = 0;                   // Σ (nᵢ − 1) over arms with ≥ 2 seeds
  std::vector<ArmNoise> arms;   // in the order given
};

// `arms[i]` holds the per-seed losses of the arm named `names[i]`.
// REQUIRES: names.size() == losses.size().
NoiseModel PoolNoise(const std::vector<std::string>& names,
                     const std::vector<std::vector<double>>& losses);

enum class SeMethod { kNone, kPooled, kWelch };
// "none", "pooled", "welch".
const char* SeMethodName(SeMethod method);

// A difference of two means judged against the noise.
struct Difference {
  double delta = 0;            // mean(V) − mean(B)
  SeMethod method = SeMethod::kNone;
  std::optional<double> se;    // unset with kNone
  std::optional<double> df;    // ν
  std::optional<double> t;     // t₀.₉₇₅(ν)
  std::optional<double> ci_low, ci_high;  // Δ ∓ t·SE
  double tau = 0;              // max(floor, t·SE), the floor with kNone
};

// V against B. REQUIRES: both non-empty, floor > 0.
Difference CompareMeans(const std::vector<double>& v, const std::vector<double>& b,
                        const NoiseModel& noise, double floor);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_POOLED_NOISE_H_
