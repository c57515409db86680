// Calibration by simulation (docs/architecture.md, docs/equal-time.md
// § Calibration): synthetic experiments with known truth, run through the
// real comparisons (CompareAtEqualSteps, CompareAtEqualTime), to measure how
// often a verdict is declared when there is no difference (the false-verdict
// rate, which must stay ≤ 5 %) and how often when there is one (power).
//
// One experiment: a baseline and a variant at one budget, `seeds` seeds
// each, and a reference curve of `budgets` budgets at 5·2ⁱ s (i = 0…), each
// with the same seeds. Seed j of an arm whose budget takes t seconds reaches
// L(t) + ε (+ Δ for the variant) and records t·(1 + time_cv·z) seconds,
// ε ~ N(0, σ²), z ~ N(0, 1), L the true curve. The baseline trains at the curve's middle budget's time;
// the variant at the same time (equal steps: Δ alone separates them) or,
// for equal time, at a reference budget's time (kAtPoint) or at the
// geometric middle of two budgets (kBetween).
//
// Thread-safety: pure functions (their own random generator, seeded).
#ifndef SMALLEM_SERVER_ANALYSIS_CALIBRATION_H_
#define SMALLEM_SERVER_ANALYSIS_CALIBRATION_H_

#include <cstdint>

namespace smallem {

// The true curve L(t), t in seconds.
enum class TrueCurve {
  kPowerLaw,  // 1.2 + 0.9·(t/10)^(−0.35): the series' shape
  kPlateau,   // 1.3 + 0.9·((t + 15)/25)^(−0.9): flat early, concave in log time
  kLogLinear, // 2.0 − 0.15·ln(t/5): no curvature in log time
};
const char* TrueCurveName(TrueCurve curve);
double TrueLoss(TrueCurve curve, double seconds);

enum class VariantTime { kAtPoint, kBetween };

struct SimulationConfig {
  int experiments = 1000;
  int seeds = 3;            // per arm and per reference budget
  int budgets = 4;          // reference budgets, ≥ 2
  double sigma = 0.003;     // seed-to-seed sd, nats/byte
  double time_cv = 0.02;    // seed-to-seed relative sd of training time
  double true_delta = 0;    // variant − truth, nats/byte
  double floor = 0.002;
  TrueCurve curve = TrueCurve::kPowerLaw;
  VariantTime where = VariantTime::kBetween;
  bool equal_time = false;  // judge at equal time (else at equal steps)
  uint64_t seed = 1;
};

struct SimulationResult {
  int experiments = 0;
  int better = 0;
  int worse = 0;
  double VerdictRate() const {
    return experiments == 0 ? 0 : static_cast<double>(better + worse) / experiments;
  }
};

// Runs `config.experiments` experiments. CHECK-fails on a comparison error
// (a simulated experiment is always well formed).
SimulationResult Simulate(const SimulationConfig& config);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CALIBRATION_H_
