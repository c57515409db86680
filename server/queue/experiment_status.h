// Progress of an experiment as a whole, summed from its runs: how many runs
// are in each state, steps done out of steps planned, and a rough time left.
// Pure functions.
#ifndef SMALLEM_SERVER_QUEUE_EXPERIMENT_STATUS_H_
#define SMALLEM_SERVER_QUEUE_EXPERIMENT_STATUS_H_

#include <cstdint>
#include <vector>

#include "server/store/store_types.h"

namespace smallem {

struct ExperimentSummary {
  RunCountsRecord counts;
  int64_t steps_done = 0;   // Σ steps done (a finished run counts all its steps)
  int64_t steps_total = 0;  // Σ steps planned (estimated for minutes budgets once running)
  double eta_s = 0;         // seconds until every queued and leased run is done; 0 = unknown/none
};

// Counts and sums over `runs`. ETA: the longest remaining time among leased
// runs, plus queued runs × the mean observed run duration spread over the
// runs currently leased (the parallelism seen now).
ExperimentSummary SummarizeRuns(const std::vector<RunRecord>& runs);

// True when every run of an experiment was cancelled (none queued, running
// or finished: nothing in it to read — a grid submitted by mistake, then
// cancelled). Lists leave such experiments out unless asked (`smallemctl
// status --all`, the dashboard's "show cancelled").
bool IsCancelledAndEmpty(const RunCountsRecord& counts);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_EXPERIMENT_STATUS_H_
