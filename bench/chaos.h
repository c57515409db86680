// The chaos test (docs/reliability.md): a real smallem-coordinator, several
// real smallem-worker daemons and a grid of tiny runs with frequent
// checkpoints; every few seconds a random one of those processes is killed
// with SIGKILL and started again. Then, once every run is done:
//   * every run succeeded and has exactly one result — none lost, none twice;
//   * the database passes PRAGMA integrity_check;
//   * a run that was killed and resumed (resumes ≥ 1) has the result of a
//     clean run of its cell, trained here by one `smallem-worker child`
//     with the same thread count (timing fields aside).
// bench/chaos_main.cc runs it at full size; tests/e2e/chaos_test.cc runs a
// small bounded version.
//
// Not thread-safe; one RunChaos at a time per directory.
#ifndef SMALLEM_BENCH_CHAOS_H_
#define SMALLEM_BENCH_CHAOS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace smallem {

struct ChaosOptions {
  std::string bin_dir;        // holds server/smallem-coordinator, worker/smallem-worker, cli/smallemctl
  std::string work_dir;       // scratch: dataset, database, caches (must exist)
  int workers = 3;
  int variants = 5;           // runs = variants × seeds
  int seeds = 4;
  int64_t steps = 4000;       // per run (tiny model: 1 layer, embed 32, context 32)
  double checkpoint_minutes = 0.005;
  int kills = 12;             // at least this many SIGKILLs, workers and coordinator
  double min_gap_s = 1.0;     // between two kills, drawn uniformly
  double max_gap_s = 3.0;
  double coordinator_share = 0.3;  // of the kills that hit the coordinator
  int64_t lease_ms = 4000;
  uint64_t seed = 1;          // of the kill schedule
  int timeout_s = 900;        // for the whole test
  bool verbose = false;       // narrate each kill on stderr
};

struct ChaosReport {
  int runs = 0;
  int results = 0;             // runs with a recorded result
  int succeeded = 0;
  int worker_kills = 0;
  int coordinator_kills = 0;
  int attempts = 0;            // over every run
  int resumed_runs = 0;        // results with resumes ≥ 1
  int64_t total_resumes = 0;
  bool integrity_ok = false;   // PRAGMA integrity_check said "ok"
  int64_t compared_run = 0;    // the resumed run checked against a clean run (0: none resumed)
  bool compared_equal = false;
  double wall_seconds = 0;
};

// Runs the test. Errors only when it cannot be run (a binary missing, the
// dataset not prepared, the timeout passed before every run finished); the
// checks' outcomes are in the report.
absl::StatusOr<ChaosReport> RunChaos(const ChaosOptions& options);

}  // namespace smallem

#endif  // SMALLEM_BENCH_CHAOS_H_
