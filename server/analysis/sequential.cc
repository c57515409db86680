#include "server/analysis/sequential.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/analysis/verdict.h"

namespace smallem {

absl::StatusOr<std::vector<LookLevel>> LookLevels(const SequentialDesign& design) {
  int last = 1;
  for (int n : design.looks) {
    if (n <= last) {
      return absl::InvalidArgumentError(absl::StrCat(
          "looks [", absl::StrJoin(design.looks, ", "),
          "]: seeds per arm must increase strictly from 2 or more (a look needs two seeds to "
          "measure the noise)"));
    }
    last = n;
  }
  if (design.looks.empty()) return absl::InvalidArgumentError("a design needs one look or more");
  std::vector<double> fractions;
  for (int n : design.looks) fractions.push_back(static_cast<double>(n) / design.looks.back());
  ASSIGN_OR_RETURN(std::vector<double> effect,
                   GroupSequentialBoundaries(design.shape, fractions, kAlpha));
  ASSIGN_OR_RETURN(std::vector<double> equivalence,
                   GroupSequentialBoundaries(design.shape, fractions, 2 * kAlpha));
  std::vector<LookLevel> out;
  for (size_t k = 0; k < design.looks.size(); ++k) {
    out.push_back({.seeds = design.looks[k],
                   .alpha = NominalLevel(effect[k]),
                   .equivalence_alpha = NominalLevel(equivalence[k]) / 2});
  }
  return out;
}

}  // namespace smallem
