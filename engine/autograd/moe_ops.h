// Differentiable mixture-of-experts ops (engine/backend.h, "Mixture of
// experts"): routing, dispatch to expert order, the grouped product and the
// gated combine back to token order. Gradients flow through the gates and
// the expert rows with the routing held fixed: which experts a token chose
// is a step function of the logits and has no gradient (the standard
// treatment; the finite-difference tests perturb values by less than the
// gap between chosen and unchosen scores).
#ifndef SMALLEM_ENGINE_AUTOGRAD_MOE_OPS_H_
#define SMALLEM_ENGINE_AUTOGRAD_MOE_OPS_H_

#include <cstdint>

#include "engine/autograd/tape.h"

namespace smallem {

// What MoeRoute decided for N tokens, k experts each (R = N·k rows).
struct MoeRouting {
  Var gates;          // (N, k) f32, differentiable w.r.t. the router logits
  Tensor experts;     // (N, k) i32
  Tensor order;       // (R) i32
  Tensor position;    // (R) i32
  Tensor offsets;     // (E + 1) i32
  int64_t top_k = 0;
};

// logits (N, E) f32. bias (E) selects only; load (E) f32 accumulates the
// counts (either may be empty). aux_coefficient > 0 adds the auxiliary
// balancing loss's gradient to the logits' (its value is not part of any
// returned Var).
MoeRouting MoeRoute(Tape& tape, Var logits, const Tensor& bias, const Tensor& load,
                    int64_t top_k, float aux_coefficient);
// x (N, C) → (R, C): row i is x[order[i] / k].
Var MoeDispatch(Tape& tape, Var x, const MoeRouting& routing);
// x (R, C) grouped by offsets (G + 1), weight (G, M, C) → (R, M).
Var GroupedMatmul(Tape& tape, Var x, Var weight, const Tensor& offsets);
// rows (R, C) → (N, C) = Σ_j gates[n, j] · rows[position[n·k + j]].
Var MoeCombine(Tape& tape, Var rows, const MoeRouting& routing);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_AUTOGRAD_MOE_OPS_H_
