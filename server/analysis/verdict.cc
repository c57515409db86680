#include "server/analysis/verdict.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "server/analysis/distributions.h"

namespace smallem {
namespace {

// z₀.₈: the standard normal's 0.8 quantile.
constexpr double kZPower = 0.8416212335729143;

double SeAt(const Evidence& e, int n) {
  const double scalable = std::max(0.0, *e.se * *e.se - e.fixed_variance);
  return std::sqrt(scalable * e.seeds_now / n + e.fixed_variance);
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kBaseline: return "baseline";
    case Verdict::kBetter: return "better";
    case Verdict::kWorse: return "worse";
    case Verdict::kEquivalent: return "equivalent";
    case Verdict::kUndecided: return "undecided";
    case Verdict::kPending: return "pending";
    case Verdict::kRefused: return "not compared";
    case Verdict::kDiverged: return "diverged";
  }
  return "?";
}

std::optional<int> SeedsToDecide(const Evidence& e) {
  CHECK(e.se.has_value());
  const double d = std::abs(e.delta);
  auto decides = [&](int n) {
    const double se = SeAt(e, n);
    const double nu = 2.0 * n - 2;
    if (d > e.floor) {
      return d - kZPower * se > std::max(e.floor, StudentTQuantile(1 - e.alpha / 2, nu) * se);
    }
    return d + (StudentTQuantile(1 - e.equivalence_alpha, nu) + kZPower) * se < e.floor;
  };
  // More seeds only narrow SE(n) and t: once n decides, every larger n does,
  // so the smallest is found by bisection.
  if (!decides(kMaxSeedsToDecide)) return std::nullopt;
  int lo = 1, hi = kMaxSeedsToDecide;  // decides(hi); lo does not (or is below 2)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (decides(mid) ? hi : lo) = mid;
  }
  return hi;
}

Judgement Judge(const Evidence& e) {
  CHECK(e.floor > 0) << "noise floor must be positive, is " << e.floor;
  Judgement j;
  j.tau = e.floor;
  j.alpha = e.alpha;
  if (!e.se) {
    j.delta_over_tau = e.delta / j.tau;
    j.reason = "noise not measured";
    return j;
  }
  CHECK(e.df.has_value() && *e.df > 0) << "an SE needs its degrees of freedom";
  CHECK(e.alpha > 0 && e.alpha < 1) << "level " << e.alpha;
  const double t95 = StudentTQuantile(0.975, *e.df);  // two-sided 95 %
  CHECK(e.equivalence_alpha > 0 && e.equivalence_alpha < 0.5) << e.equivalence_alpha;
  const double t90 = StudentTQuantile(1 - e.equivalence_alpha, *e.df);  // TOST
  j.tau = std::max(e.floor, StudentTQuantile(1 - e.alpha / 2, *e.df) * *e.se);
  j.delta_over_tau = e.delta / j.tau;
  j.tost_low = e.delta - t90 * *e.se;
  j.tost_high = e.delta + t90 * *e.se;
  if (std::abs(e.delta) > j.tau) {
    j.verdict = e.delta < 0 ? Verdict::kBetter : Verdict::kWorse;
    return j;
  }
  if (*j.tost_low > -e.floor && *j.tost_high < e.floor) {
    j.verdict = Verdict::kEquivalent;
    j.reason = absl::StrFormat("within ±%.4f", e.floor);
    return j;
  }
  j.missable = std::max(std::abs(e.delta - t95 * *e.se), std::abs(e.delta + t95 * *e.se));
  j.seeds_to_decide = SeedsToDecide(e);
  j.decide_beyond_max = !j.seeds_to_decide.has_value();
  j.reason = absl::StrFormat("effects up to %.4f not ruled out; ", *j.missable);
  if (j.seeds_to_decide) {
    absl::StrAppend(&j.reason, "~", *j.seeds_to_decide, " seeds per arm would decide");
  } else {
    absl::StrAppend(&j.reason, "more than ", kMaxSeedsToDecide,
                    " seeds per arm would decide (Δ lies near the floor)");
  }
  return j;
}

std::string FormatTauMultiple(double delta_over_tau) {
  // Rounding first, so that 9.996 prints "10.0τ", not "10.00τ".
  if (std::round(delta_over_tau * 100) / 100 < 10) return absl::StrFormat("%.2fτ", delta_over_tau);
  if (std::round(delta_over_tau * 10) / 10 < 100) return absl::StrFormat("%.1fτ", delta_over_tau);
  return absl::StrFormat("%.0fτ", delta_over_tau);
}

std::string VerdictText(Verdict verdict, const std::optional<double>& delta_over_tau,
                        const std::string& reason) {
  switch (verdict) {
    case Verdict::kBetter:
    case Verdict::kWorse:
      CHECK(delta_over_tau.has_value());
      return absl::StrCat(VerdictName(verdict), " (",
                          FormatTauMultiple(std::abs(*delta_over_tau)), ")");
    case Verdict::kEquivalent:
      return reason.empty() ? "equivalent" : absl::StrCat("equivalent (", reason, ")");
    case Verdict::kUndecided:
      return reason.empty() ? "undecided" : absl::StrCat("undecided: ", reason);
    case Verdict::kPending:
      return absl::StrCat("pending: ", reason);
    case Verdict::kRefused:
      return absl::StrCat("not compared: ", reason);
    case Verdict::kDiverged:
      return absl::StrCat("diverged: ", reason);
    default:
      return VerdictName(verdict);
  }
}

}  // namespace smallem
