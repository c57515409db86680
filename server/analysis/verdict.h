// Verdict: where a variant stands against the baseline or the reference
// curve, and the one rule both comparisons use to reach it
// (docs/equal-time.md): a loss difference Δ in nats per byte, lower is
// better, is judged against the noise threshold τ. |Δ| > τ gives `better`
// (Δ < 0) or `worse`, stated as a multiple of τ ("better (5.0τ)");
// otherwise `within noise`. τ is measured by CompareAtEqualSteps
// (server/analysis/comparator.h) and reused at equal time (server/analysis/time_comparator.h).
//
// Thread-safety: free functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_VERDICT_H_
#define SMALLEM_SERVER_ANALYSIS_VERDICT_H_

#include <optional>
#include <string>

namespace smallem {

// kRefused: the two arms cannot be compared (their validation texts differ,
// or the baseline diverged). kDiverged: a seed of the arm diverged (its loss
// went non-finite): the arm has no mean and is not compared.
enum class Verdict { kBaseline, kBetter, kWorse, kWithinNoise, kPending, kRefused, kDiverged };
// "baseline", "better", "worse", "within noise", "pending", "not compared",
// "diverged".
const char* VerdictName(Verdict verdict);

// Δ judged against τ.
struct Judgement {
  Verdict verdict = Verdict::kWithinNoise;  // kBetter, kWorse or kWithinNoise
  double delta_over_tau = 0;                // |Δ| / τ
};

// Judges `delta` (nats per byte, lower is better) against `tau`.
// REQUIRES: tau > 0 (CHECKed).
Judgement JudgeDelta(double delta, double tau);

// |Δ|/τ for people: two decimals below 10 ("1.04τ"), one below 100
// ("24.5τ"), none from 100 on ("184τ").
std::string FormatTauMultiple(double delta_over_tau);

// For people: "baseline", "better (5.00τ)", "worse (1.30τ)", "within noise",
// "pending: ", "not compared: " or "diverged: " followed by `reason`. REQUIRES:
// `delta_over_tau` is set when `verdict` is kBetter or kWorse (CHECKed).
std::string VerdictText(Verdict verdict, const std::optional<double>& delta_over_tau,
                        const std::string& reason);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_VERDICT_H_
