// Training batches from the token stream held in backend memory: row r of
// the batch is the T + 1 tokens from starts[r], split into inputs (the first
// T) and targets (the last T) — what TrainBatches::Next builds on the host.
#include <cstring>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::GatherSequences(const GatherSequencesParams& p) {
  const int64_t rows = p.starts.numel(), time = p.time;
  const int64_t count = p.tokens.numel();
  CheckGatherSequences(p);
  const int32_t* tokens = p.tokens.i32();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t start = p.starts.i32()[r];
    CHECK(start >= 0 && start + time + 1 <= count)
        << "gather_sequences: start " << start << " of row " << r << " leaves no " << time + 1
        << " tokens in a split of " << count;
    std::memcpy(p.inputs.i32() + r * time, tokens + start, time * sizeof(int32_t));
    std::memcpy(p.targets.i32() + r * time, tokens + start + 1, time * sizeof(int32_t));
  }
}

}  // namespace smallem
