// Sequential seeds in the service (docs/equal-time.md § Sequential seeds):
// the coordinator's decision at each look, and what status and report say
// of it.
//
// An experiment whose grid has `seeds: {start, max, looks}` decides each
// variant V against the baseline B at the looks n₁ < … < n_K (seeds per
// arm). Look k of V is decided once V's and B's first n_k seeds
// (SeedSchedule::SeedsUpTo) have all finished, by the equal-steps
// comparison of those two arms alone (CompareAtEqualSteps, noise pooled
// over V and B) at the look's levels (LookLevels, O'Brien–Fleming):
//   better / worse / equivalent   V stops;
//   undecided, k < K              "continue": V's and B's seeds up to n_{k+1}
//                                 are queued (B's once, whichever arm asks);
//   undecided, k ≥ 2, futile      V stops undecided (never a verdict) when
//                                 FutilityStop(kFutility) says its chance of
//                                 a verdict at the last look is below 10 %;
//                                 the decision's reason says so ("futility:
//                                 …") and nothing is queued;
//   undecided at the last look    V stops undecided, with the seeds per arm
//                                 that would likely decide it;
//   diverged / not compared       V stops (a diverged seed, a diverged or
//                                 refused baseline).
// An experiment with a cancelled run decides nothing until `retry`
// requeues it.
//
// Thread-safety: pure functions on values.
#ifndef SMALLEM_SERVER_QUEUE_SEQUENTIAL_LOOKS_H_
#define SMALLEM_SERVER_QUEUE_SEQUENTIAL_LOOKS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/store/store_types.h"

namespace smallem {

// The SqliteStore::LookPlanner of the coordinator: the looks that `in` can
// decide now, and the runs they queue. Nothing for an experiment without a
// seed schedule. Errors of ParseGrid, SeedSchedule::FromJson and the
// comparator (a stored grid or result that does not read back).
absl::StatusOr<LookPlan> PlanLooks(const LookInputs& in, int64_t now_ms);

// Where one arm of a sequential experiment stands.
struct ArmLooks {
  std::string variant;
  bool baseline = false;
  int looks_done = 0;   // looks decided for it (the baseline: none)
  int looks_total = 0;  // the schedule's looks
  int seeds = 0;        // seeds spent: its runs at the grid's budget
  bool stopped = false;
  // For people: "stopped at look 1: better (3 seeds per arm, …)",
  // "open: waiting for look 2 at 5 seeds", "stopped at look 2 of 5 (5 seeds
  // per arm): undecided; …; futility: a 3 % chance of a verdict at the
  // last look …", "stopped at the last look: undecided, about 14 seeds per
  // arm would decide it".
  std::string why;
};

// The arms of a sequential experiment and its decision log.
struct LooksSummary {
  std::vector<int> looks;  // the schedule's seeds per arm at each look
  int max = 0;             // its cap
  bool paused = false;     // a run is cancelled: nothing is decided until `retry`
  std::vector<ArmLooks> arms;  // grid order, the baseline's first
  std::vector<LookDecisionRecord> decisions;  // (variant, look) order
};

// nullopt for an experiment without a seed schedule. Errors as PlanLooks.
absl::StatusOr<std::optional<LooksSummary>> SummarizeLooks(
    const ExperimentRecord& experiment, const std::vector<RunRecord>& runs,
    const std::vector<LookDecisionRecord>& decisions);

// A title line, then "arm  looks  seeds  why" (two-space indented columns)
// for a text report or `smallemctl status`; `markdown`: a table instead.
std::string RenderLooks(const LooksSummary& summary, bool markdown);

// {"looks", "max", "shape", "paused", "arms": [...], "decisions": [...]}:
// the JSON report's "sequential" object (its decision log).
nlohmann::json LooksJson(const LooksSummary& summary);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_SEQUENTIAL_LOOKS_H_
