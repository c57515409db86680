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
#include <vector>

#include "server/analysis/group_sequential.h"
#include "server/analysis/sequential.h"

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

// Sequential seeds at equal steps (server/analysis/sequential.h): a
// baseline and a variant, seed j of an arm reaching ε (+ Δ for the
// variant), ε ~ N(0, σ²); at each look the first n_k seeds of both arms go
// through CompareAtEqualSteps at the look's levels, and the experiment
// stops at the first better, worse or equivalent (else undecided at the
// last look, or earlier for futility). One look is the fixed design.
// Experiment e draws from its own generator, seeded by (seed, e): its Δ,
// then seed j of the baseline and of the variant for j = 0, 1, …, so
// designs with different looks (a fixed 10-seed design, a sequential one
// up to 11) see the same experiments, the same first seeds.
struct SequentialConfig {
  int experiments = 1000;
  std::vector<int> looks = {3, 5, 10};
  BoundaryShape shape = BoundaryShape::kOBrienFleming;
  // false: every look at the fixed design's 5 % — looking again without a
  // correction, what a researcher rerunning by hand does.
  bool corrected = true;
  // An arm whose ConditionalPower falls below futility.below stops
  // undecided before the last look (FutilityStop; below = 0: never).
  FutilityRule futility;
  double sigma = 0.003;
  double floor = 0.002;
  double true_delta = 0;  // variant − baseline, nats/byte (ignored with `mixture`)
  // Half the experiments null, the others |Δ| uniform in [0.5σ, 4σ] with a
  // random sign.
  bool mixture = false;
  uint64_t seed = 1;
};

struct SequentialResult {
  int experiments = 0;
  int better = 0, worse = 0, equivalent = 0, undecided = 0;
  int64_t runs = 0;          // seeds spent, both arms, over all experiments
  int64_t runs_squared = 0;  // Σ (runs of one experiment)², for RunsSe
  int stopped_early = 0;     // decided before the last look
  int futile = 0;            // stopped undecided for futility
  int non_null = 0;          // experiments with Δ ≠ 0
  int found = 0;             // of those, decided better (Δ < 0) or worse (Δ > 0)
  int null_false = 0;        // Δ = 0 decided better or worse
  double Power() const { return non_null == 0 ? 0 : static_cast<double>(found) / non_null; }
  double RunsPerExperiment() const {
    return experiments == 0 ? 0 : static_cast<double>(runs) / experiments;
  }
  // The standard error of RunsPerExperiment.
  double RunsSe() const;
};

SequentialResult SimulateSequential(const SequentialConfig& config);

// Calibration on real runs of one configuration (docs/equal-time.md
// § On real runs): n seeds of the same model trained for real, split every
// way into two disjoint arms of k seeds, each split compared at equal steps
// as if one arm were a variant. The true difference is 0, so a `better` or
// `worse` is a false verdict. The splits share seeds, so their outcomes are
// not independent: the rate's standard error is the jackknife's over the n
// seeds (each left out in turn, the rate over the splits of the rest).
struct NullSplits {
  int64_t splits = 0;  // ordered (A, B) pairs: each unordered split twice
  int64_t better = 0, worse = 0, equivalent = 0, undecided = 0;
  double false_rate = 0;     // (better + worse) / splits
  double false_rate_se = 0;  // jackknife over the seeds
};

// REQUIRES: losses.size() ≥ 2·arm_seeds + 1 (the jackknife leaves one out),
// arm_seeds ≥ 2, every loss finite.
NullSplits CompareNullSplits(const std::vector<double>& losses, int arm_seeds,
                             double floor = 0.002);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CALIBRATION_H_
