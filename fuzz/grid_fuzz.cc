// FuzzGrid: a grid file's YAML. What ParseGrid accepts expands into cells
// whose run specs validate (ParseGrid promises it; RunSpecFor CHECKs it).
#include <string_view>

#include "base/check.h"
#include "fuzz/fuzz_targets.h"
#include "runspec/grid.h"

namespace smallem::fuzz {

int FuzzGrid(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Grid> grid = ParseGrid(text, "fuzz.yaml");
  if (!grid.ok()) {
    CHECK(!grid.status().message().empty()) << "a refusal says why";
    return 0;
  }
  // Expanding a huge grid is the coordinator's cap to refuse, not a bug.
  if (grid->RunCountBound() > 10'000) return 0;
  for (const Cell& cell : grid->Cells()) {
    const RunSpec spec = grid->RunSpecFor(cell);
    CHECK(spec.Validate().ok()) << "an accepted grid's cell fails validation";
  }
  return 0;
}

}  // namespace smallem::fuzz
