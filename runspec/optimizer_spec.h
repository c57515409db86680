// OptimizerSpec: the parsed form of a run spec's optimizer string
// (docs/muon.md):
//
//   adamw
//   muon[:short][,period=K][,norm][,boost=G][,stack=off]
//
// `muon` orthogonalizes with the 10-iteration Newton–Schulz schedule,
// `muon:short` with the 4-iteration minimax schedule (docs/muon.md). The
// options combine in any order, each at most once; `adamw` takes none.
// Plain value type.
#ifndef SMALLEM_RUNSPEC_OPTIMIZER_SPEC_H_
#define SMALLEM_RUNSPEC_OPTIMIZER_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace smallem {

struct OptimizerSpec {
  enum class Kind { kAdamW, kMuon };
  enum class Schedule { kStandard, kShort };  // muon: 10 iterations; muon:short: 4

  Kind kind = Kind::kAdamW;
  Schedule schedule = Schedule::kStandard;
  // Muon options.
  int64_t period = 1;   // orthogonalize one step in `period`; 1 = every step
  bool norm = false;    // NorMuon: per-neuron second-moment normalization
  double boost = 1.0;   // SAMuon-lite factor γ ≥ 1; 1 = off
  bool stack = true;    // one batched product per shape

  // The canonical string: name, then the options that differ from their
  // defaults in the order period, norm, boost, stack. Parsing it gives an
  // equal spec.
  std::string ToString() const;
  bool operator==(const OptimizerSpec&) const = default;
};

// Parses an optimizer string. Errors name the offending piece and list the
// choices, e.g. `unknown optimizer option "perod=3" (expected period=K, norm,
// boost=G, stack=off)`.
absl::StatusOr<OptimizerSpec> ParseOptimizerSpec(std::string_view text);

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_OPTIMIZER_SPEC_H_
