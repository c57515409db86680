#include "engine/autograd/moe_ops.h"

#include "base/check.h"

namespace smallem {

MoeRouting MoeRoute(Tape& tape, Var logits, const Tensor& bias, const Tensor& load,
                    int64_t top_k, float aux_coefficient) {
  const Tensor raw = tape.value(logits);
  CHECK(raw.dtype == DType::kF32) << "moe route: logits must be f32";
  const Tensor vl = raw.Reshaped({raw.shape.rows(), raw.shape.cols()});
  const int64_t n = vl.shape[0], e = vl.shape[1];
  MoeRouting r{.experts = tape.NewTensor({n, top_k}, DType::kI32),
               .order = tape.NewTensor({n * top_k}, DType::kI32),
               .position = tape.NewTensor({n * top_k}, DType::kI32),
               .offsets = tape.NewTensor({e + 1}, DType::kI32),
               .top_k = top_k};
  const Tensor gates = tape.NewTensor({n, top_k});
  tape.backend().MoeRouteForward(MoeRouteParams{
      .logits = vl, .bias = bias, .experts = r.experts, .gates = gates, .order = r.order,
      .position = r.position, .offsets = r.offsets, .load = load, .top_k = top_k});
  r.gates = tape.Record(Op::kMoeRoute, gates, {logits},
                        [=, experts = r.experts, offsets = r.offsets](Tape& t, Var y) {
                          if (!t.requires_grad(logits)) return;
                          t.backend().MoeRouteBackward(MoeRouteBackwardParams{
                              .logits = vl, .experts = experts, .gates = gates,
                              .offsets = offsets, .grad_gates = t.Grad(y),
                              .grad_logits = t.Grad(logits).Reshaped(vl.shape),
                              .aux_coefficient = aux_coefficient});
                        });
  return r;
}

Var MoeDispatch(Tape& tape, Var x, const MoeRouting& routing) {
  const Tensor vx = tape.value(x);
  const int64_t rows = routing.order.numel(), c = vx.shape.cols();
  const Tensor out = tape.NewTensor({rows, c}, vx.dtype);
  tape.backend().MoeDispatchForward(MoeDispatchParams{
      .x = vx.Reshaped({vx.shape.rows(), c}), .order = routing.order, .out = out,
      .top_k = routing.top_k});
  const Tensor position = routing.position;
  const int64_t k = routing.top_k;
  return tape.Record(Op::kMoePermute, out, {x}, [=](Tape& t, Var y) {
    if (!t.requires_grad(x)) return;
    t.backend().MoeDispatchBackward(MoeDispatchBackwardParams{
        .grad_out = t.Grad(y), .position = position,
        .grad_x = t.Grad(x).Reshaped({vx.shape.rows(), c}), .top_k = k});
  });
}

Var GroupedMatmul(Tape& tape, Var x, Var weight, const Tensor& offsets) {
  const Tensor vx = tape.value(x);
  const Tensor vw = tape.value(weight);
  const Tensor out = tape.NewTensor({vx.shape[0], vw.shape[1]}, tape.activation_dtype());
  tape.backend().GroupedMatmulForward(
      GroupedMatmulParams{.x = vx, .weight = vw, .offsets = offsets, .out = out});
  return tape.Record(Op::kGroupedMatmul, out, {x, weight}, [=](Tape& t, Var y) {
    // The first gradient of x is written, not added (no zero fill).
    bool fresh = false;
    const Tensor grad_x = t.requires_grad(x) ? t.GradToWrite(x, &fresh) : Tensor{};
    t.backend().GroupedMatmulBackward(GroupedMatmulBackwardParams{
        .x = vx, .weight = vw, .offsets = offsets, .grad_out = t.Grad(y),
        .grad_x = grad_x, .grad_weight = t.GradIfNeeded(weight), .overwrite_x = fresh});
  });
}

Var MoeCombine(Tape& tape, Var rows, const MoeRouting& routing) {
  const Tensor vr = tape.value(rows);
  const Tensor vg = tape.value(routing.gates);
  const int64_t n = vg.shape[0], c = vr.shape.cols();
  const Tensor out = tape.NewTensor({n, c}, vr.dtype);
  const Tensor position = routing.position;
  tape.backend().MoeCombineForward(
      MoeCombineParams{.rows = vr, .gates = vg, .position = position, .out = out});
  const Var gates = routing.gates;
  return tape.Record(Op::kMoePermute, out, {rows, gates}, [=](Tape& t, Var y) {
    bool fresh = false;
    const Tensor grad_rows = t.requires_grad(rows) ? t.GradToWrite(rows, &fresh) : Tensor{};
    const Tensor grad_gates = t.GradIfNeeded(gates);
    if (grad_rows.empty() && grad_gates.empty()) return;
    t.backend().MoeCombineBackward(MoeCombineBackwardParams{
        .rows = vr, .gates = vg, .position = position, .grad_out = t.Grad(y),
        .grad_rows = grad_rows, .grad_gates = grad_gates, .overwrite_rows = fresh});
  });
}

}  // namespace smallem
