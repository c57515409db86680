// Monotone piecewise-cubic Hermite interpolation (PCHIP, Fritsch–Carlson
// slopes with the Fritsch–Butland weighted harmonic mean inside and the
// three-point end rule of Moler's pchip): through every knot, monotone on
// each interval between knots whose values are monotone, no overshoot.
// Outside the knots the end interval's tangent line is extended.
//
// Thread-safety: an immutable value.
#ifndef SMALLEM_SERVER_ANALYSIS_PCHIP_H_
#define SMALLEM_SERVER_ANALYSIS_PCHIP_H_

#include <cstddef>
#include <vector>

namespace smallem {

class Pchip {
 public:
  // REQUIRES: xs strictly increasing, xs.size() == ys.size() >= 2 (CHECKed).
  Pchip(std::vector<double> xs, std::vector<double> ys);

  double Value(double x) const;
  double Slope(double x) const;  // dy/dx

 private:
  size_t Interval(double x) const;
  std::vector<double> xs_, ys_, slopes_;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_PCHIP_H_
