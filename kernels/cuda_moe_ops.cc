// CudaBackend's mixture-of-experts ops: operand checks (engine/op_checks.h),
// then the launchers of kernels/moe_route.cu, moe_permute.cu and
// grouped_matmul.cu.
#include <cstdint>

#include "base/check.h"
#include "engine/op_checks.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/moe_kernels.h"

namespace smallem {
namespace {

cuda::ActIn In(const Tensor& t) { return cuda::ActIn{t.data, t.dtype == DType::kBF16}; }
cuda::ActOut Out(const Tensor& t) {
  return t.empty() ? cuda::ActOut{} : cuda::ActOut{t.data, t.dtype == DType::kBF16};
}
float* F32OrNull(const Tensor& t) { return t.empty() ? nullptr : t.f32(); }

}  // namespace

void CudaBackend::MoeRouteForward(const MoeRouteParams& p) {
  CheckMoeRoute(p);
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1];
  CheckCuda(cuda::LaunchMoeRouteForward(p.logits.f32(), F32OrNull(p.bias), n, e, p.top_k,
                                        p.experts.i32(), p.gates.f32(), p.order.i32(),
                                        p.position.i32(), p.offsets.i32(), F32OrNull(p.load),
                                        stream()),
            "moe_route forward");
}

void CudaBackend::MoeRouteBackward(const MoeRouteBackwardParams& p) {
  CheckMoeRouteBackward(p);
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1], k = p.experts.shape[1];
  CheckCuda(cuda::LaunchMoeRouteBackward(p.logits.f32(), p.experts.i32(), p.gates.f32(),
                                         p.offsets.i32(), p.grad_gates.f32(),
                                         p.grad_logits.f32(), n, e, k, p.aux_coefficient,
                                         stream()),
            "moe_route backward");
}

void CudaBackend::MoeBalance(const MoeBalanceParams& p) {
  CheckMoeBalance(p);
  CheckCuda(cuda::LaunchMoeBalance(p.bias.f32(), p.load.f32(), p.last_load.f32(),
                                   p.bias.numel(), p.rate, stream()),
            "moe_balance");
}

void CudaBackend::MoeDispatchForward(const MoeDispatchParams& p) {
  CheckMoeDispatch(p);
  CheckCuda(cuda::LaunchMoeDispatchForward(In(p.x), p.order.i32(), Out(p.out), p.x.shape[0],
                                           p.x.shape[1], p.top_k, stream()),
            "moe_dispatch forward");
}

void CudaBackend::MoeDispatchBackward(const MoeDispatchBackwardParams& p) {
  CheckMoeDispatchBackward(p);
  CheckCuda(cuda::LaunchMoeDispatchBackward(In(p.grad_out), p.position.i32(), Out(p.grad_x),
                                            p.grad_x.shape[0], p.grad_x.shape[1], p.top_k,
                                            stream()),
            "moe_dispatch backward");
}

void CudaBackend::MoeCombineForward(const MoeCombineParams& p) {
  CheckMoeCombine(p);
  CheckCuda(cuda::LaunchMoeCombineForward(In(p.rows), p.gates.f32(), p.position.i32(),
                                          Out(p.out), p.out.shape[0], p.out.shape[1],
                                          p.gates.shape[1], stream()),
            "moe_combine forward");
}

void CudaBackend::MoeCombineBackward(const MoeCombineBackwardParams& p) {
  CheckMoeCombineBackward(p);
  CheckCuda(cuda::LaunchMoeCombineBackward(In(p.rows), p.gates.f32(), p.position.i32(),
                                           In(p.grad_out), Out(p.grad_rows),
                                           F32OrNull(p.grad_gates), p.grad_out.shape[0],
                                           p.grad_out.shape[1], p.gates.shape[1], p.overwrite_rows,
                                           stream()),
            "moe_combine backward");
}

void CudaBackend::GroupedMatmulForward(const GroupedMatmulParams& p) {
  CheckGroupedMatmul(p);
  CheckCuda(cuda::LaunchGroupedMatmulForward(In(p.x), p.weight.f32(), p.offsets.i32(),
                                             Out(p.out), p.x.shape[0], p.weight.shape[0],
                                             p.weight.shape[1], p.weight.shape[2], stream()),
            "grouped_matmul forward");
}

void CudaBackend::GroupedMatmulBackward(const GroupedMatmulBackwardParams& p) {
  if (p.grad_x.empty() && p.grad_weight.empty()) return;
  CheckGroupedMatmulBackward(p);
  CheckCuda(cuda::LaunchGroupedMatmulBackward(In(p.x), p.weight.f32(), p.offsets.i32(),
                                              In(p.grad_out), Out(p.grad_x),
                                              F32OrNull(p.grad_weight), p.x.shape[0],
                                              p.weight.shape[0], p.weight.shape[1],
                                              p.weight.shape[2], p.overwrite_x, stream()),
            "grouped_matmul backward");
}

}  // namespace smallem
