// A local minimizer for the reference curve's refits (server/analysis/
// curve_fit.h, RefitFormNear): the Nelder–Mead simplex method (Nelder and
// Mead, 1965, with the standard coefficients: reflection 1, expansion 2,
// contraction 1/2, shrink 1/2) from a given start, for a few variables.
// Bounds are the caller's: clamp inside the objective.
//
// Thread-safety: a pure function.
#ifndef SMALLEM_SERVER_ANALYSIS_NELDER_MEAD_H_
#define SMALLEM_SERVER_ANALYSIS_NELDER_MEAD_H_

#include <functional>
#include <vector>

namespace smallem {

struct NelderMeadOptions {
  double initial_step = 0.1;  // the start simplex: start + step·eᵢ
  double tolerance = 1e-7;    // stop when every vertex is this close to the best, per coordinate
  int max_evaluations = 400;
};

struct NelderMeadResult {
  std::vector<double> x;
  double value = 0;
  int evaluations = 0;
};

// A local minimum of `f` near `start` (≥ 1 variable). Deterministic.
NelderMeadResult MinimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                    std::vector<double> start, const NelderMeadOptions& options = {});

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_NELDER_MEAD_H_
