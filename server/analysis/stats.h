// The few statistics the comparisons share (equal_steps.cc, noise_report.cc,
// reference_runs.cc, curve_choice.cc, calibration.cc): means, sample
// variance, Welch's t-test and a reproducible normal draw.
#ifndef SMALLEM_SERVER_ANALYSIS_STATS_H_
#define SMALLEM_SERVER_ANALYSIS_STATS_H_

#include <optional>
#include <random>
#include <vector>

namespace smallem {

// REQUIRES: !xs.empty().
double Mean(const std::vector<double>& xs);
// Unbiased sample variance. REQUIRES: xs.size() >= 2.
double SampleVariance(const std::vector<double>& xs);

// A standard normal draw from two of `rng`'s outputs (Box–Muller), so that a
// seed gives the same draws with any standard library.
double StandardNormal(std::mt19937_64& rng);

struct WelchResult {
  double t = 0;   // (mean(a) − mean(b)) / standard error
  double df = 0;  // Welch–Satterthwaite degrees of freedom
};
// Welch's t of a against b; nullopt when both samples are constant (no
// standard error). REQUIRES: a.size() >= 2 and b.size() >= 2.
std::optional<WelchResult> Welch(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_STATS_H_
