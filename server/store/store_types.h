// The coordinator's records as plain values: what SqliteStore reads and
// writes, what JobQueue and the gRPC services pass around. No behaviour
// beyond name tables.
#ifndef SMALLEM_SERVER_STORE_STORE_TYPES_H_
#define SMALLEM_SERVER_STORE_STORE_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

// Mirrors smallem.v1.RunStatus; stored as the lower-case name. kDiverged is
// terminal like kSucceeded: the run trained until its loss or gradient norm
// went non-finite; it is never requeued (retrying repeats it).
enum class RunStatus { kQueued, kLeased, kSucceeded, kFailed, kCancelled, kDiverged };
const char* RunStatusName(RunStatus status);  // "queued", ...
absl::StatusOr<RunStatus> ParseRunStatus(std::string_view name);
inline bool IsFinished(RunStatus s) {
  return s == RunStatus::kSucceeded || s == RunStatus::kFailed || s == RunStatus::kCancelled ||
         s == RunStatus::kDiverged;
}

// Mirrors smallem.v1.FailureClass; stored as the lower-case name ("" = none).
enum class FailureClass { kNone, kLeaseLost, kEngineError, kInvalidConfig, kDiverged };
const char* FailureClassName(FailureClass c);  // "", "lease_lost", ...
FailureClass ParseFailureClass(std::string_view name);  // unknown → kNone

// The outcome of an attempt its worker handed back (WorkerService.Release):
// no failure, so no FailureClass.
inline constexpr std::string_view kReleasedOutcome = "released";

struct ProgressRecord {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;          // nats/token
  double tokens_per_s = 0;
  double elapsed_s = 0;
  double eta_s = 0;
  // A mixture of experts: the step's max/mean tokens per expert, worst MoE
  // layer (1 = even); 0 for a dense model. The tokens per expert are not
  // stored.
  double max_over_mean_load = 0;
};

struct MetricPointRecord {
  int attempt = 0;
  int64_t step = 0;
  double loss = 0;  // nats/token
  double tokens_per_s = 0;
  double elapsed_s = 0;
  int64_t unix_ms = 0;
  double max_over_mean_load = 0;  // as ProgressRecord's; 0 = dense
};

struct ExperimentRecord {
  int64_t id = 0;
  std::string name;
  std::string baseline;
  std::string grid_file;
  std::string grid_yaml;
  std::string dataset_hash;
  std::string seed_schedule;  // SeedSchedule::ToJson, or '' for a plain list of seeds
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

struct RunCountsRecord {
  int queued = 0, leased = 0, succeeded = 0, failed = 0, cancelled = 0, diverged = 0, total = 0;
};

struct RunRecord {
  int64_t id = 0;
  int64_t experiment_id = 0;
  int64_t variant_id = 0;
  std::string variant;       // variant name
  std::string variant_kind;  // "variant" or "reference"
  std::string spec_json;     // the variant's canonical spec (no data/seed/budget)
  std::string spec_hash;
  int64_t seed = 0;
  std::string budget;        // "steps:N" / "minutes:M"
  std::optional<int64_t> budget_steps;
  std::optional<double> budget_minutes;
  RunStatus status = RunStatus::kQueued;
  int attempt = 0;
  int engine_failures = 0;
  int lease_losses = 0;
  int retry_budget = 0;
  std::string lease_worker;
  std::string lease_device;
  std::string lease_device_class;
  int64_t lease_expires_unix_ms = 0;
  ProgressRecord progress;
  FailureClass last_failure = FailureClass::kNone;
  std::string last_error;
  int64_t diverged_step = 0;                // the step a diverged run stopped at; else 0
  std::optional<double> last_finite_loss;   // a diverged run's last finite loss, if any
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

// Where a diverged attempt stopped (Fail with FailureClass::kDiverged).
struct DivergenceRecord {
  int64_t step = 0;                       // the step training stopped at
  std::optional<double> last_finite_loss;  // nats/token; none when no loss was finite
};

struct ResultRecord {
  int64_t run_id = 0;
  int attempt = 0;
  std::string result_json;
  int64_t created_unix_ms = 0;
};

struct AttemptRecord {
  int64_t run_id = 0;
  int attempt = 0;
  std::string worker_id;
  std::string device;
  std::string device_class;
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;
  std::string outcome;  // "" while running, then "succeeded", a failure class,
                        // "cancelled" or kReleasedOutcome
  std::string message;
};

struct WorkerRecord {
  std::string id;
  std::string hostname;
  std::string slurm_job_id;  // "" when the worker does not run under Slurm
  std::string slurm_node;
  std::string devices_json;  // [{"name":..,"device_class":..,"memory_bytes":..}]
  int64_t registered_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
};

// One cell of a submission, as the grid expands it.
struct CellRecord {
  std::string variant;
  std::string variant_kind;  // "variant" or "reference"
  std::string spec_json;
  std::string spec_hash;
  int64_t seed = 0;
  std::string budget;  // BudgetKey
  std::optional<int64_t> budget_steps;
  std::optional<double> budget_minutes;
};

struct SubmissionRecord {
  std::string name;
  std::string baseline;
  std::string grid_file;
  std::string grid_yaml;
  std::string dataset_hash;
  std::string seed_schedule;  // SeedSchedule::ToJson, or '' for a plain list of seeds
  int retry_budget = 2;
  std::vector<CellRecord> cells;
};

struct SubmitOutcome {
  int64_t experiment_id = 0;
  int total = 0;      // cells of the submission
  int added = 0;      // new runs queued
  int reissued = 0;   // failed/cancelled runs queued again
  int unchanged = 0;  // finished or pending runs left alone
};

// One look of sequential seeds decided for one variant (table
// look_decisions, migration 0007; docs/equal-time.md § Sequential seeds).
struct LookDecisionRecord {
  int64_t experiment_id = 0;
  std::string variant;
  int look = 0;   // 1-based index into the schedule's looks
  int seeds = 0;  // seeds per arm at that look
  // "better", "worse", "equivalent" (stopped), "continue" (the next look's
  // seeds queued), "undecided" (stopped at the last look), "diverged" or
  // "not compared" (stopped: no comparison possible).
  std::string outcome;
  std::optional<double> delta, ci_low, ci_high, tau;  // nats/byte, at equal steps
  double alpha = 0;              // the look's two-sided level of better/worse
  double equivalence_alpha = 0;  // its one-sided level of each test of equivalence
  std::optional<int> seeds_to_decide;  // undecided: seeds per arm that would likely decide
  std::string reason;                  // the verdict's text, for people
  int64_t decided_unix_ms = 0;
};

// What a LookPlanner sees of one experiment, read inside the transaction
// that will write its plan.
struct LookInputs {
  ExperimentRecord experiment;
  std::vector<RunRecord> runs;           // id order
  std::vector<ResultRecord> results;     // of those runs
  std::vector<LookDecisionRecord> decisions;  // (variant, look) order
};

// What a LookPlanner decided: new decisions (never one whose (variant,
// look) is already recorded) and the cells they queue (a cell that already
// has a run is left alone).
struct LookPlan {
  std::vector<LookDecisionRecord> decisions;
  std::vector<CellRecord> cells;
  int retry_budget = 2;  // of the queued runs
};

// What a lease hands a worker.
struct LeaseRecord {
  RunRecord run;  // as leased: status kLeased, the new attempt number
  std::string dataset_hash;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_STORE_STORE_TYPES_H_
