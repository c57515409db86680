#include "server/analysis/pooled_noise.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"

namespace smallem {

NoiseModel PoolNoise(const std::vector<std::string>& names,
                     const std::vector<std::vector<double>>& losses) {
  CHECK_EQ(names.size(), losses.size());
  NoiseModel out;
  double sum_squares = 0;  // Σ (nᵢ − 1)·sᵢ²
  for (size_t i = 0; i < names.size(); ++i) {
    ArmNoise arm{.name = names[i], .seeds = static_cast<int>(losses[i].size())};
    if (losses[i].size() >= 2) {
      const double var = SampleVariance(losses[i]);
      arm.stddev = std::sqrt(var);
      sum_squares += var * static_cast<double>(losses[i].size() - 1);
      out.df += static_cast<int>(losses[i].size() - 1);
    }
    out.arms.push_back(std::move(arm));
  }
  if (out.df > 0) out.sigma = std::sqrt(sum_squares / out.df);

  for (ArmNoise& arm : out.arms) {
    if (!arm.stddev) continue;
    const int df_arm = arm.seeds - 1;
    const int df_rest = out.df - df_arm;
    if (df_rest < 1) continue;
    const double var_rest = (sum_squares - *arm.stddev * *arm.stddev * df_arm) / df_rest;
    if (!(var_rest > 0)) continue;
    arm.f_ratio = *arm.stddev * *arm.stddev / var_rest;
    arm.f_df_rest = df_rest;
    const double cdf = FCdf(*arm.f_ratio, df_arm, df_rest);
    arm.f_p = std::min(1.0, 2 * std::min(cdf, 1 - cdf));
    arm.departs = *arm.f_p < kVarianceTestLevel;
  }
  return out;
}

const char* SeMethodName(SeMethod method) {
  switch (method) {
    case SeMethod::kNone: return "none";
    case SeMethod::kPooled: return "pooled";
    case SeMethod::kWelch: return "welch";
  }
  return "?";
}

Difference CompareMeans(const std::vector<double>& v, const std::vector<double>& b,
                        const NoiseModel& noise, double floor) {
  CHECK(!v.empty() && !b.empty() && floor > 0);
  Difference d;
  d.delta = Mean(v) - Mean(b);
  if (v.size() >= 3 && b.size() >= 3) {
    if (const std::optional<WelchResult> welch = Welch(v, b)) {
      d.method = SeMethod::kWelch;
      d.se = std::sqrt(SampleVariance(v) / static_cast<double>(v.size()) +
                       SampleVariance(b) / static_cast<double>(b.size()));
      d.df = welch->df;
    }
  }
  if (d.method == SeMethod::kNone && noise.sigma) {
    d.method = SeMethod::kPooled;
    d.se = *noise.sigma * std::sqrt(1.0 / v.size() + 1.0 / b.size());
    d.df = noise.df;
  }
  d.tau = floor;
  if (d.method != SeMethod::kNone) {
    d.t = StudentTQuantile(0.975, *d.df);
    d.ci_low = d.delta - *d.t * *d.se;
    d.ci_high = d.delta + *d.t * *d.se;
    d.tau = std::max(floor, *d.t * *d.se);
  }
  return d;
}

}  // namespace smallem
