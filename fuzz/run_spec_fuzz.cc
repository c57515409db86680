// FuzzRunSpec: a run spec's JSON (what a worker's child reads, what a grid
// cell becomes). A spec that validates yields a model config that
// validates, and its canonical JSON reads back as the same spec.
#include <string_view>

#include "base/check.h"
#include "fuzz/fuzz_targets.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"

namespace smallem::fuzz {

int FuzzRunSpec(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(json);
  if (!spec.ok() || !spec->Validate().ok()) return 0;
  absl::StatusOr<RunSpec> again = RunSpec::FromJson(spec->ToJson());
  CHECK(again.ok()) << "a valid spec's JSON is refused: " << again.status();
  CHECK(again->ToJson() == spec->ToJson()) << "the canonical JSON does not round-trip";
  for (int64_t vocab : {256, 4096}) (void)spec->ModelFor(vocab).Validate();
  return 0;
}

}  // namespace smallem::fuzz
