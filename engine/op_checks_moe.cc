// The operand checks of the mixture-of-experts ops (engine/op_checks.h).
#include "base/check.h"
#include "engine/op_checks.h"

namespace smallem {

void CheckMoeRoute(const MoeRouteParams& p) {
  CHECK_EQ(p.logits.shape.rank(), 2) << "moe_route: logits " << p.logits.shape.ToString();
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1], k = p.top_k;
  CHECK(k >= 1 && k <= e) << "moe_route: top_k " << k << " for " << e << " experts";
  CheckF32(p.logits, n * e, "moe_route: logits");
  if (!p.bias.empty()) CheckF32(p.bias, e, "moe_route: bias");
  CheckI32(p.experts, n * k, "moe_route: experts");
  CheckF32(p.gates, n * k, "moe_route: gates");
  CheckI32(p.order, n * k, "moe_route: order");
  CheckI32(p.position, n * k, "moe_route: position");
  CheckI32(p.offsets, e + 1, "moe_route: offsets");
  if (!p.load.empty()) CheckF32(p.load, e, "moe_route: load");
}

void CheckMoeRouteBackward(const MoeRouteBackwardParams& p) {
  CHECK_EQ(p.logits.shape.rank(), 2) << "moe_route backward: logits";
  CHECK_EQ(p.experts.shape.rank(), 2) << "moe_route backward: experts";
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1], k = p.experts.shape[1];
  CheckF32(p.logits, n * e, "moe_route backward: logits");
  CheckI32(p.experts, n * k, "moe_route backward: experts");
  CheckF32(p.gates, n * k, "moe_route backward: gates");
  CheckI32(p.offsets, e + 1, "moe_route backward: offsets");
  CheckF32(p.grad_gates, n * k, "moe_route backward: grad_gates");
  CheckF32(p.grad_logits, n * e, "moe_route backward: grad_logits");
  CHECK_GE(p.aux_coefficient, 0.0f) << "moe_route backward: aux_coefficient";
}

void CheckMoeBalance(const MoeBalanceParams& p) {
  const int64_t e = p.bias.numel();
  CheckF32(p.bias, e, "moe_balance: bias");
  CheckF32(p.load, e, "moe_balance: load");
  CheckF32(p.last_load, e, "moe_balance: last_load");
}

void CheckMoeDispatch(const MoeDispatchParams& p) {
  CHECK_EQ(p.x.shape.rank(), 2) << "moe_dispatch: x " << p.x.shape.ToString();
  const int64_t n = p.x.shape[0], c = p.x.shape[1], k = p.top_k;
  CHECK_GE(k, 1) << "moe_dispatch: top_k";
  CheckActivation(p.x, n * c, "moe_dispatch: x");
  CheckI32(p.order, n * k, "moe_dispatch: order");
  CheckActivation(p.out, n * k * c, "moe_dispatch: out");
}

void CheckMoeDispatchBackward(const MoeDispatchBackwardParams& p) {
  CHECK_EQ(p.grad_x.shape.rank(), 2) << "moe_dispatch backward: grad_x";
  const int64_t n = p.grad_x.shape[0], c = p.grad_x.shape[1], k = p.top_k;
  CHECK_GE(k, 1) << "moe_dispatch backward: top_k";
  CheckActivation(p.grad_x, n * c, "moe_dispatch backward: grad_x");
  CheckI32(p.position, n * k, "moe_dispatch backward: position");
  CheckActivation(p.grad_out, n * k * c, "moe_dispatch backward: grad_out");
}

void CheckMoeCombine(const MoeCombineParams& p) {
  CHECK_EQ(p.out.shape.rank(), 2) << "moe_combine: out";
  CHECK_EQ(p.gates.shape.rank(), 2) << "moe_combine: gates";
  const int64_t n = p.out.shape[0], c = p.out.shape[1], k = p.gates.shape[1];
  CheckActivation(p.out, n * c, "moe_combine: out");
  CheckF32(p.gates, n * k, "moe_combine: gates");
  CheckI32(p.position, n * k, "moe_combine: position");
  CheckActivation(p.rows, n * k * c, "moe_combine: rows");
}

void CheckMoeCombineBackward(const MoeCombineBackwardParams& p) {
  CHECK_EQ(p.grad_out.shape.rank(), 2) << "moe_combine backward: grad_out";
  CHECK_EQ(p.gates.shape.rank(), 2) << "moe_combine backward: gates";
  const int64_t n = p.grad_out.shape[0], c = p.grad_out.shape[1], k = p.gates.shape[1];
  CheckActivation(p.grad_out, n * c, "moe_combine backward: grad_out");
  CheckF32(p.gates, n * k, "moe_combine backward: gates");
  CheckI32(p.position, n * k, "moe_combine backward: position");
  CheckActivation(p.rows, n * k * c, "moe_combine backward: rows");
  if (!p.grad_rows.empty()) CheckActivation(p.grad_rows, n * k * c, "moe_combine backward: grad_rows");
  if (!p.grad_gates.empty()) CheckF32(p.grad_gates, n * k, "moe_combine backward: grad_gates");
}

namespace {

void CheckGroupedShapes(const Tensor& x, const Tensor& weight, const Tensor& offsets,
                        const Tensor& out, const char* op) {
  CHECK_EQ(x.shape.rank(), 2) << op << ": x " << x.shape.ToString();
  CHECK_EQ(weight.shape.rank(), 3) << op << ": weight " << weight.shape.ToString();
  const int64_t r = x.shape[0], k = x.shape[1];
  const int64_t g = weight.shape[0], m = weight.shape[1];
  CHECK_EQ(weight.shape[2], k) << op << ": weight " << weight.shape.ToString() << " for x "
                               << x.shape.ToString();
  CheckActivation(x, r * k, op);
  CheckF32(weight, g * m * k, op);
  CheckI32(offsets, g + 1, op);
  CheckActivation(out, r * m, op);
}

}  // namespace

void CheckGroupedMatmul(const GroupedMatmulParams& p) {
  CheckGroupedShapes(p.x, p.weight, p.offsets, p.out, "grouped_matmul");
  CHECK(p.out.data != p.x.data) << "grouped_matmul: out may not alias x";
}

void CheckGroupedMatmulBackward(const GroupedMatmulBackwardParams& p) {
  CheckGroupedShapes(p.x, p.weight, p.offsets, p.grad_out, "grouped_matmul backward");
  if (!p.grad_x.empty()) CheckActivation(p.grad_x, p.x.numel(), "grouped_matmul backward: grad_x");
  if (!p.grad_weight.empty()) {
    CheckF32(p.grad_weight, p.weight.numel(), "grouped_matmul backward: grad_weight");
  }
}

}  // namespace smallem
