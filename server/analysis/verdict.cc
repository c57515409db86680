#include "server/analysis/verdict.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"

namespace smallem {

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kBaseline: return "baseline";
    case Verdict::kBetter: return "better";
    case Verdict::kWorse: return "worse";
    case Verdict::kWithinNoise: return "within noise";
    case Verdict::kPending: return "pending";
    case Verdict::kRefused: return "not compared";
    case Verdict::kDiverged: return "diverged";
  }
  return "?";
}

Judgement JudgeDelta(double delta, double tau) {
  CHECK(tau > 0) << "noise threshold τ must be positive, is " << tau;
  Judgement judgement;
  judgement.delta_over_tau = std::abs(delta) / tau;
  judgement.verdict = std::abs(delta) > tau ? (delta < 0 ? Verdict::kBetter : Verdict::kWorse)
                                            : Verdict::kWithinNoise;
  return judgement;
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
      return absl::StrCat(VerdictName(verdict), " (", FormatTauMultiple(*delta_over_tau), ")");
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
