// Runs as the comparisons read them (server/analysis/equal_steps.h: ComparedRun), for
// the comparator, reference-curve, noise, plot and report tests.
#ifndef SMALLEM_TESTS_SERVER_COMPARED_RUNS_H_
#define SMALLEM_TESTS_SERVER_COMPARED_RUNS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "server/analysis/equal_steps.h"

namespace smallem::testing {

inline Budget Steps(int64_t n) { return Budget{.steps = n, .minutes = std::nullopt}; }

// The run of `variant` and `seed` at a budget of `steps` steps, in `state`,
// with the results a succeeded run reports.
inline ComparedRun MakeRun(const std::string& variant, int64_t seed, int64_t steps,
                           RunState state, double loss = 0, double seconds = 0,
                           const std::string& device_class = "cpu", int64_t params = 0) {
  ComparedRun r;
  r.variant = variant;
  r.seed = seed;
  r.budget = Steps(steps);
  r.state = state;
  r.val_nats_per_byte = loss;
  r.train_seconds = seconds;
  r.params = params;
  r.device_class = device_class;
  return r;
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_SERVER_COMPARED_RUNS_H_
