#include "server/queue/experiment_status.h"

#include <algorithm>

namespace smallem {

ExperimentSummary SummarizeRuns(const std::vector<RunRecord>& runs) {
  ExperimentSummary s;
  double longest_leased_eta = 0;
  double duration_sum = 0;
  int durations = 0;
  for (const RunRecord& run : runs) {
    ++s.counts.total;
    const int64_t planned =
        run.progress.total_steps > 0 ? run.progress.total_steps : run.budget_steps.value_or(0);
    s.steps_total += planned;
    switch (run.status) {
      case RunStatus::kQueued: ++s.counts.queued; break;
      case RunStatus::kLeased:
        ++s.counts.leased;
        s.steps_done += run.progress.step;
        longest_leased_eta = std::max(longest_leased_eta, run.progress.eta_s);
        break;
      case RunStatus::kSucceeded: ++s.counts.succeeded; s.steps_done += planned; break;
      case RunStatus::kFailed: ++s.counts.failed; break;
      case RunStatus::kCancelled: ++s.counts.cancelled; break;
      case RunStatus::kDiverged: ++s.counts.diverged; break;
    }
    if (run.progress.elapsed_s > 0 && (run.status == RunStatus::kLeased ||
                                       run.status == RunStatus::kSucceeded)) {
      duration_sum += run.progress.elapsed_s + run.progress.eta_s;
      ++durations;
    }
  }
  s.eta_s = longest_leased_eta;
  if (s.counts.queued > 0 && durations > 0) {
    const double mean = duration_sum / durations;
    s.eta_s += s.counts.queued * mean / std::max(1, s.counts.leased);
  }
  return s;
}

bool IsCancelledAndEmpty(const RunCountsRecord& counts) {
  return counts.cancelled == counts.total;
}

}  // namespace smallem
