// The equal-time reference curve (DESIGN.md § Comparisons, docs/equal-time.md):
// what the reference model reaches after any training time, measured by
// complete runs of increasing length (each decaying its learning rate to its
// own end) and interpolated between them.
//
//  * A point is one budget of the reference: the mean training seconds and
//    the mean validation loss (nats per byte) of that budget's seeds, all
//    finished on ONE device class. A budget with a seed missing on that
//    class gives no point yet.
//  * R(t) is piecewise linear in log(seconds) between consecutive points
//    (ordered by time): for t_i ≤ t ≤ t_{i+1},
//        u = (ln t − ln t_i) / (ln t_{i+1} − ln t_i),   R(t) = L_i + u·(L_{i+1} − L_i).
//    It is exact at the points and lies between L_i and L_{i+1} on each
//    segment (monotone there, whatever the direction of the change).
//  * Outside [t_first, t_last] the nearest segment's line is extended (same
//    formula, u < 0 or u > 1) and the value is flagged extrapolated, with
//    span_ratio = t / t_first (< 1) or t / t_last (> 1): how far outside the
//    measured span it lies, as a ratio of times (0.8 = 20 % shorter than the
//    shortest reference run).
//
// Thread-safety: TimeCurve is an immutable value; functions are pure.
#ifndef SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_
#define SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/analysis/comparator.h"

namespace smallem {

// The name Grid::Cells gives reference cells (and so the store their runs).
inline constexpr char kReferenceVariant[] = "reference";

// One budget of the reference curve.
struct CurvePoint {
  Budget budget;
  double seconds = 0;  // mean training seconds of the budget's seeds
  double loss = 0;     // mean val nats/byte of the budget's seeds
  // Per seed, in the reference plan's seed order (for plots).
  std::vector<double> seed_seconds;
  std::vector<double> seed_losses;
  std::vector<int64_t> seed_steps;  // ComparedRun::steps, else the budget's steps, else 0
};

// R(t) at one time.
struct Interpolated {
  double value = 0;           // nats/byte
  bool extrapolated = false;  // t outside [first point's time, last point's time]
  double span_ratio = 1;      // t / nearest end's time when extrapolated; 1 inside
};

// A curve through at least two points with distinct positive times.
class TimeCurve {
 public:
  // `points` in any order. InvalidArgument when there are fewer than two, a
  // time is not a positive finite number, a loss is not finite, or two points
  // have the same time (the curve would be vertical there).
  static absl::StatusOr<TimeCurve> Create(std::vector<CurvePoint> points);

  // By increasing time.
  const std::vector<CurvePoint>& points() const { return points_; }
  double first_seconds() const { return points_.front().seconds; }
  double last_seconds() const { return points_.back().seconds; }

  // R(seconds); REQUIRES: seconds > 0 and finite (CHECKed).
  Interpolated Interpolate(double seconds) const;

 private:
  explicit TimeCurve(std::vector<CurvePoint> points) : points_(std::move(points)) {}
  std::vector<CurvePoint> points_;
};

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

#endif  // SMALLEM_SERVER_ANALYSIS_REFERENCE_CURVE_H_
