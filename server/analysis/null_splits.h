// The comparator on real runs of one configuration (docs/equal-time.md
// § On real runs): n seeds of the same model trained for real, split every
// way into two disjoint arms of k seeds, each split compared at equal steps
// as if one arm were a variant. The true difference is 0, so a `better` or
// `worse` is a false verdict. The splits share seeds, so their outcomes are
// not independent: the rate's standard error is the jackknife's over the n
// seeds (each left out in turn, the rate over the splits of the rest).
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_NULL_SPLITS_H_
#define SMALLEM_SERVER_ANALYSIS_NULL_SPLITS_H_

#include <cstdint>
#include <vector>

namespace smallem {

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

#endif  // SMALLEM_SERVER_ANALYSIS_NULL_SPLITS_H_
