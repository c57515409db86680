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

std::string VerdictText(Verdict verdict, const std::optional<double>& delta_over_tau,
                        const std::string& pending_reason) {
  switch (verdict) {
    case Verdict::kBetter:
    case Verdict::kWorse:
      CHECK(delta_over_tau.has_value());
      return absl::StrFormat("%s (%.1fτ)", VerdictName(verdict), *delta_over_tau);
    case Verdict::kPending:
      return absl::StrCat("pending: ", pending_reason);
    default:
      return VerdictName(verdict);
  }
}

}  // namespace smallem
