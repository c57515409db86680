// The runs behind the equal-time reference curve (docs/equal-time.md,
// docs/equal-time.md): complete runs of the reference model at increasing
// budgets (each decaying its learning rate to its own end), gathered into
// one point per budget on ONE device class. The curve through them is
// server/analysis/reference_curve.h; which model is used, its leave-one-out check
// and its bootstrap uncertainty are server/analysis/curve_choice.h.
//
//  * A point is one budget of the reference: the mean training seconds and
//    the mean validation loss (nats per byte) of that budget's seeds, all
//    finished on ONE device class. A budget with a seed missing on that
//    class gives no point yet.
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_REFERENCE_RUNS_H_
#define SMALLEM_SERVER_ANALYSIS_REFERENCE_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/equal_steps.h"
#include "server/analysis/reference_curve.h"

namespace smallem {

// The name Grid::Cells gives reference cells (and so the store their runs).
inline constexpr char kReferenceVariant[] = "reference";

// What the reference runs of a plan amount to on one device class.
struct ReferenceRuns {
  std::string device_class;
  int budgets_expected = 0;
  // One per budget whose seeds all finished on the class, in budget order.
  std::vector<CurvePoint> points;
  // One per budget still incomplete there: "12000 steps: 1 of 2 seeds finished".
  std::vector<std::string> pending;
  int finished = 0;  // reference runs finished on the class
  // Finished reference runs on other classes, and those classes (sorted).
  int finished_elsewhere = 0;
  std::vector<std::string> other_classes;
};

// Gathers the reference runs of `plan` from `runs` on `device_class`.
// InvalidArgument when two finished runs claim the same budget, seed and
// device class.
absl::StatusOr<ReferenceRuns> GatherReferenceRuns(const ReferencePlan& plan,
                                                  const std::vector<ComparedRun>& runs,
                                                  const std::string& device_class);

// The device class on which most reference runs of `plan` finished (ties:
// the smallest name); "" when none has.
std::string ReferenceDeviceClass(const ReferencePlan& plan, const std::vector<ComparedRun>& runs);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_REFERENCE_RUNS_H_
