// Submitting a grid: parse the grid file the client sent, check that its
// dataset was uploaded, expand it into cells and record them (SqliteStore::
// Submit: new cells queued, failed ones reissued, finished ones untouched).
// Sequential seeds: the cells are the `start` seeds plus those the looks
// already queued (reissued when failed or cancelled, never added).
#ifndef SMALLEM_SERVER_QUEUE_SUBMISSION_H_
#define SMALLEM_SERVER_QUEUE_SUBMISSION_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/store/sqlite_store.h"

namespace smallem {

inline constexpr size_t kMaxGridBytes = 4 << 20;

struct GridSubmission {
  std::string yaml;       // the grid file's text
  std::string file_name;  // as the client named it (messages, relative data dirs)
  // Grid::data_dir → content hash of the uploaded dataset.
  std::map<std::string, std::string> dataset_hashes;
  int retry_budget = 0;   // engine errors retried per run; 0 = the default
};

struct SubmittedGrid {
  std::string experiment_name;
  SubmitOutcome outcome;
};

// InvalidArgument for a malformed grid (file:line: key, from ParseGrid), a
// grid larger than kMaxGridBytes, one that expands to more than `max_runs`
// runs, or no hash for its dataset directory;
// FailedPrecondition when that dataset was not uploaded, or the experiment
// exists with another dataset.
absl::StatusOr<SubmittedGrid> SubmitGrid(SqliteStore& store, const Clock& clock,
                                         const GridSubmission& submission,
                                         int default_retry_budget, int64_t max_runs);

}  // namespace smallem

#endif  // SMALLEM_SERVER_QUEUE_SUBMISSION_H_
