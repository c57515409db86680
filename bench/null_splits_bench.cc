// The comparator on real runs of one configuration (docs/equal-time.md
// § On real runs): reads the result.json of each run given, splits their
// seeds every way into two arms of --arm-seeds, compares each split at equal
// steps (server/analysis/calibration.h) and prints the outcomes and the
// false-verdict rate with its jackknife SE. bench/null_splits.sh trains the
// runs (the demo's baseline, ten seeds) and calls it.
//
//   build/bench/smallem_null_splits_bench [--arm-seeds 3] RESULT.json...
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/flags.h"
#include "nlohmann/json.hpp"
#include "server/analysis/calibration.h"
#include "runspec/run_result.h"

int main(int argc, char** argv) {
  using namespace smallem;
  const int arm_seeds = static_cast<int>(bench::Flag(argc, argv, "--arm-seeds", 3));
  std::vector<double> losses;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--arm-seeds") {
      ++i;
      continue;
    }
    std::ifstream in(arg);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    const absl::StatusOr<RunResult> result = RunResult::FromStoredJson(j);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", arg.c_str(), std::string(result.status().message()).c_str());
      return 2;
    }
    losses.push_back(result->val_nats_per_byte);
  }
  if (static_cast<int>(losses.size()) < 2 * arm_seeds + 1) {
    std::fprintf(stderr, "need at least %d results for arms of %d\n", 2 * arm_seeds + 1,
                 arm_seeds);
    return 2;
  }
  double mean = 0;
  for (double l : losses) mean += l / losses.size();
  double var = 0;
  for (double l : losses) var += (l - mean) * (l - mean) / (losses.size() - 1);
  const NullSplits r = CompareNullSplits(losses, arm_seeds);
  std::printf("| seeds | σ per seed | splits | better | worse | equivalent | undecided | "
              "false better or worse |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %zu | %.4f | %lld | %lld | %lld | %lld | %lld | %.2f %% ± %.2f |\n",
              losses.size(), std::sqrt(var), static_cast<long long>(r.splits),
              static_cast<long long>(r.better), static_cast<long long>(r.worse),
              static_cast<long long>(r.equivalent), static_cast<long long>(r.undecided),
              100 * r.false_rate, 100 * r.false_rate_se);
  return 0;
}
