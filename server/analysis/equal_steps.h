// Comparator: turns the finished runs of an experiment into a verdict per
// variant against the baseline, at equal steps (docs/equal-time.md).
// Pure logic: no store, no RPC; the caller gathers the runs.
//
// The rules, for a plan (baseline B, variants, seeds, budget):
//  * Only runs at the plan's budget, of the plan's variants and seeds, and
//    on ONE device class are compared: the plan's, or else the class on
//    which most of the baseline's finished runs ran (ties: the smallest
//    name; before the baseline has any result, the class most finished runs
//    used). Finished runs on any other class are listed in
//    Report::left_out and a note says so; they are never mixed in.
//  * A variant is compared only when every one of its seeds has finished on
//    that class; otherwise its row is pending and says why (seeds left,
//    failures, runs on another class). Nothing is compared until the
//    baseline itself is complete.
//  * Noise: σ pooled over every arm with ≥ 2 finished seeds on the class,
//    with an F test per arm (server/analysis/pooled_noise.h). With one seed
//    everywhere the noise is not measured: τ is the floor and a note says so.
//  * Per row: Δ = mean(V) − mean(B) in val nats per byte, lower is better;
//    its standard error (Welch's with ≥ 3 seeds in both arms, else the
//    pooled σ·√(1/n_V + 1/n_B)), the 95 % interval Δ ± t·SE and the row's
//    threshold τ = max(noise_floor, t·SE), t = t₀.₉₇₅ at the SE's degrees of
//    freedom. |Δ| > τ gives `better` (Δ < 0) or `worse`, stated as a
//    multiple of τ ("better (5.00τ)"); the 90 % interval inside ±floor gives
//    `equivalent`; anything else, and every row without a measured noise,
//    is `undecided`, with what it could have missed and the seeds per arm
//    that would decide it (server/analysis/verdict.h). With plan.holm, each
//    row's τ uses its Holm level across the compared rows
//    (server/analysis/holm.h); a note states the family either way.
//  * One validation text: when both arms' results carry an eval_fingerprint
//    and they differ (or an arm's seeds disagree), the row is refused
//    (Verdict::kRefused) with a note; results without one compare as before.
//  * Parameter counts (the active ones: a mixture of experts counts the
//    parameters a token uses) are shown side by side; a change of more than
//    params_warning_fraction (2 %) of the baseline's count raises a warning:
//    the comparison is then not at equal size.
//
// Thread-safety: free functions on values; nothing shared.
#ifndef SMALLEM_SERVER_ANALYSIS_EQUAL_STEPS_H_
#define SMALLEM_SERVER_ANALYSIS_EQUAL_STEPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/pooled_noise.h"
#include "server/analysis/verdict.h"
#include "runspec/run_spec.h"

namespace smallem {

struct Grid;

// Where a run stands, as far as a comparison cares (the store's statuses:
// queued → kPending, leased → kRunning, diverged → kDiverged; the others by
// name). Pending reasons name each, so a report never calls a cancelled run
// failed.
enum class RunState {
  kPending,    // queued: a result may still come
  kRunning,    // leased by a worker: a result may still come
  kSucceeded,  // finished with a result
  kFailed,     // failed for good: needs `smallemctl retry`
  kCancelled,  // cancelled: needs `smallemctl retry`
  kDiverged,   // its loss went non-finite: an outcome, with no loss to compare
};

// One run (one cell) of the experiment, as the store knows it.
struct ComparedRun {
  std::string variant;
  int64_t seed = 0;
  Budget budget;
  RunState state = RunState::kPending;
  int64_t diverged_step = 0;  // kDiverged: the step training stopped at
  // The fields below are read only when state == kSucceeded.
  double val_nats_per_byte = 0;
  double train_seconds = 0;
  // The parameters a token uses ("active_params", or "params" in results
  // without it), which the size check compares; total_params counts every
  // expert of a mixture of experts (0 = unknown, or equal to params).
  int64_t params = 0;
  int64_t total_params = 0;
  std::string device_class;
  // Optimizer steps done (the result's "steps"); unset: the budget's steps.
  // Only plots read it (loss against steps for a minutes budget).
  std::optional<int64_t> steps;
  // The result's "eval_fingerprint": which validation targets were scored
  // (dataset content hash + positions). "" = not recorded (older results).
  std::string eval_fingerprint;
  // What the run cost, from its result; unset when the result predates the
  // field or did not measure it (generation).
  std::optional<int64_t> kv_cache_bytes_per_token;
  std::optional<double> tokens_per_s;             // training throughput
  std::optional<double> generation_tokens_per_s;  // greedy, batch 1, with the cache
};

// The equal-time reference curve a plan compares against (Grid::reference;
// server/analysis/reference_runs.h builds the curve). Reference runs are the runs of
// the variant named "reference" at these budgets and seeds, plus those of
// `shared_variant`: Grid::Cells lists a reference cell identical to a
// variant's cell (same spec, seed and budget) once, as the variant's.
struct ReferencePlan {
  std::vector<Budget> budgets;  // strictly increasing; all steps or all minutes
  std::vector<int64_t> seeds;
  std::string shared_variant;   // the variant whose spec is the reference's; "" = none
};

// What to compare.
struct ComparisonPlan {
  std::string experiment;
  std::string baseline;               // must be one of `variants`
  std::vector<std::string> variants;  // row order (the baseline's row comes first)
  std::vector<int64_t> seeds;         // the seeds each variant must finish
  // Sequential seeds: the seeds of the arms that have others than `seeds`
  // (each arm's first n seeds, SeedSchedule::SeedsUpTo); an arm is compared
  // on its own seeds, its SE on its own n.
  std::map<std::string, std::vector<int64_t>> arm_seeds;
  Budget budget;                      // the budget compared
  double noise_floor = 0.002;         // nats per byte; τ never goes below it
  double params_warning_fraction = 0.02;
  std::string device_class;           // "" = the baseline's (see above)
  // The reference curve for the equal-time comparison; ignored at equal steps.
  std::optional<ReferencePlan> reference;
  // Holm's correction across the compared variants (server/analysis/holm.h):
  // each row's better/worse at its Holm level instead of `alpha`.
  bool holm = false;
  // The levels of better/worse (two-sided) and of each one-sided test of
  // equivalence: kAlpha, or a sequential look's (server/analysis/sequential.h).
  double alpha = kAlpha;
  double equivalence_alpha = kAlpha;

  // The comparison a grid file describes (with its reference curve, if any).
  static ComparisonPlan ForGrid(const Grid& grid);

  // arm_seeds[variant] when set, else seeds.
  const std::vector<int64_t>& SeedsOf(const std::string& variant) const;
  // `seeds`, then every other seed of arm_seeds in order of appearance.
  std::vector<int64_t> AllSeeds() const;
  bool HasSeed(const std::string& variant, int64_t seed) const;
};

struct ReportRow {
  std::string variant;
  Verdict verdict = Verdict::kPending;
  int seeds_finished = 0;  // on the compared device class
  int seeds_expected = 0;
  // Per-seed val nats/byte of the finished seeds, in the plan's seed order.
  std::vector<double> losses;
  // Set when every seed finished.
  std::optional<double> mean_loss;
  std::optional<double> mean_train_seconds;
  // Set on compared rows (not the baseline's, not pending ones).
  std::optional<double> delta;           // mean(V) − mean(B), nats/byte
  SeMethod se_method = SeMethod::kNone;  // how SE was obtained
  std::optional<double> se;              // standard error of Δ
  std::optional<double> df;              // its degrees of freedom
  std::optional<double> t_quantile;      // t₀.₉₇₅(df)
  std::optional<double> ci_low;          // Δ − t·SE
  std::optional<double> ci_high;         // Δ + t·SE
  std::optional<double> tau;             // max(floor, t_{1−α/2}·SE)
  double alpha = kAlpha;                 // the level better/worse was judged at
  std::optional<double> delta_over_tau;  // Δ / τ, with Δ's sign
  std::optional<double> tost_low;        // Δ − t₀.₉₅·SE: the 90 % interval
  std::optional<double> tost_high;       // Δ + t₀.₉₅·SE
  // Undecided rows with a measured noise (Judgement): the largest |Δ| the
  // 95 % interval does not rule out, and the seeds per arm that would
  // likely decide (unset with decide_beyond_max past kMaxSeedsToDecide).
  std::optional<double> missable_effect;
  std::optional<int> seeds_to_decide;
  bool decide_beyond_max = false;
  std::optional<double> welch_t;         // ≥ 3 seeds in both arms and some variance
  std::optional<double> welch_df;
  // From the first finished run of the row, when there is one.
  std::optional<int64_t> params;          // active parameters
  std::optional<int64_t> total_params;    // when they differ from params (MoE)
  std::optional<double> params_change;   // (params − baseline's) / baseline's
  bool params_warning = false;           // |params_change| > params_warning_fraction
  // Set on pending rows ("1 of 2 seeds finished"), refused ones (why),
  // diverged ones ("1 of 2 seeds diverged (seed 2 at step 40)"), undecided
  // ones ("noise not measured", or what would decide) and equivalent ones
  // (the margin).
  std::string pending_reason;
  // The cache of the first finished run; the throughputs averaged over the
  // finished runs that measured them.
  std::optional<int64_t> kv_cache_bytes_per_token;
  std::optional<double> mean_tokens_per_s;
  std::optional<double> mean_generation_tokens_per_s;

  // "baseline", "better (5.00τ)", "worse (1.30τ)", "equivalent (within
  // ±0.0020)", "undecided: …", "pending: 1 of 2 seeds finished",
  // "not compared: …".
  std::string VerdictText() const;
};

// A finished run that was not compared because it ran on another device
// class than the one compared.
struct LeftOutRun {
  std::string variant;
  int64_t seed = 0;
  std::string device_class;
};

struct Report {
  std::string experiment;
  std::string baseline;
  Budget budget;
  std::string device_class;  // the class compared; "" while the baseline has no result
  double noise_floor = 0.002;
  // Pooled over the rows' finished seeds, in row order (NoiseModel::arms
  // parallel to rows).
  NoiseModel noise;
  std::vector<ReportRow> rows;            // the baseline's first, then the plan's order
  // The family of better/worse verdicts: the rows compared, each at kAlpha
  // (about family_size·kAlpha false ones when nothing differs) or, with
  // holm, at its Holm level (at most kAlpha for any false one).
  int family_size = 0;
  bool holm = false;
  std::vector<LeftOutRun> left_out;
  std::vector<std::string> notes;         // sentences for people, in order of importance

  // True when no row is pending.
  bool Complete() const;
};

// Compares `runs` according to `plan`. Runs of other variants, seeds or
// budgets (e.g. reference-curve runs) are ignored. An arm with a diverged
// seed is kDiverged: no mean, no Δ (its other seeds' losses are listed);
// when it is the baseline's, the other arms are kRefused. InvalidArgument when the
// plan is inconsistent (baseline not among its variants, no seeds, a
// non-positive floor) or when two finished runs claim the same variant, seed
// and device class.
absl::StatusOr<Report> CompareAtEqualSteps(const ComparisonPlan& plan,
                                           const std::vector<ComparedRun>& runs);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_EQUAL_STEPS_H_
