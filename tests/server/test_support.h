// Helpers shared by the server, worker and e2e tests: a temporary directory
// (tests/temp_dir.h) and small submissions.
#ifndef SMALLEM_TESTS_SERVER_TEST_SUPPORT_H_
#define SMALLEM_TESTS_SERVER_TEST_SUPPORT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "server/store/store_types.h"
#include "tests/temp_dir.h"

namespace smallem::testing {

// A submission of `variants` × `seeds` cells at `steps` steps.
inline SubmissionRecord MakeSubmission(const std::string& name, int variants, int seeds,
                                       int64_t steps = 20) {
  SubmissionRecord s{.name = name, .baseline = "v0", .grid_file = name + ".yaml",
                     .grid_yaml = "name: " + name, .dataset_hash = "feedbeef",
                     .retry_budget = 2, .cells = {}};
  for (int seed = 1; seed <= seeds; ++seed) {
    for (int v = 0; v < variants; ++v) {
      s.cells.push_back(CellRecord{
          .variant = absl::StrCat("v", v), .variant_kind = "variant",
          .spec_json = absl::StrCat("{\"layers\":1,\"lr\":0.00", v + 1, "}"),
          .spec_hash = absl::StrCat("hash", v), .seed = seed,
          .budget = absl::StrCat("steps:", steps), .budget_steps = steps,
          .budget_minutes = std::nullopt});
    }
  }
  return s;
}

// A sequential grid of the look tests: seeds 1–3, then up to 6 at a second
// look. In their results `good` is far better than the baseline from its
// first look; `open` is within the noise (±0.003) and too noisy to be
// shown equivalent at look 1.
inline constexpr char kSequentialGrid[] = R"(name: seq
data: ../data/demo
base: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4}
budget: {steps: 20}
seeds: {start: [1, 2, 3], max: 6, looks: [3, 6]}
baseline: base
variants:
  base: {}
  good: {lr: 0.01}
  open: {lr: 0.0031}
)";

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_SERVER_TEST_SUPPORT_H_
