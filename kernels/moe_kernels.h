// The mixture-of-experts launchers (kernels/moe_route.cu, moe_permute.cu,
// grouped_matmul.cu), with the conventions of kernels/kernels.h.
#ifndef SMALLEM_KERNELS_MOE_KERNELS_H_
#define SMALLEM_KERNELS_MOE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernels.h"

namespace smallem::cuda {

// Mixture of experts (engine/backend.h, "Mixture of experts"): N tokens, E
// experts, k per token; i32 index operands.
// moe_route.cu. bias and load may be null.
cudaError_t LaunchMoeRouteForward(const float* logits, const float* bias, int64_t n, int64_t e,
                                  int64_t k, int32_t* experts, float* gates, int32_t* order,
                                  int32_t* position, int32_t* offsets, float* load,
                                  cudaStream_t stream);
cudaError_t LaunchMoeRouteBackward(const float* logits, const int32_t* experts,
                                   const float* gates, const int32_t* offsets,
                                   const float* grad_gates, float* grad_logits, int64_t n,
                                   int64_t e, int64_t k, float aux_coefficient,
                                   cudaStream_t stream);
cudaError_t LaunchMoeBalance(float* bias, float* load, float* last_load, int64_t e, float rate,
                             cudaStream_t stream);
// moe_permute.cu
cudaError_t LaunchMoeDispatchForward(ActIn x, const int32_t* order, ActOut out, int64_t n,
                                     int64_t c, int64_t k, cudaStream_t stream);
cudaError_t LaunchMoeDispatchBackward(ActIn grad_out, const int32_t* position, ActOut grad_x,
                                      int64_t n, int64_t c, int64_t k, cudaStream_t stream);
cudaError_t LaunchMoeCombineForward(ActIn rows, const float* gates, const int32_t* position,
                                    ActOut out, int64_t n, int64_t c, int64_t k,
                                    cudaStream_t stream);
// grad_rows (null data) or grad_gates (null) may be absent.
cudaError_t LaunchMoeCombineBackward(ActIn rows, const float* gates, const int32_t* position,
                                     ActIn grad_out, ActOut grad_rows, float* grad_gates,
                                     int64_t n, int64_t c, int64_t k, bool overwrite_rows,
                                     cudaStream_t stream);
// grouped_matmul.cu: x (rows, k), weight (groups, m, k), offsets (groups + 1).
cudaError_t LaunchGroupedMatmulForward(ActIn x, const float* weight, const int32_t* offsets,
                                       ActOut out, int64_t rows, int64_t groups, int64_t m,
                                       int64_t k, cudaStream_t stream);
cudaError_t LaunchGroupedMatmulBackward(ActIn x, const float* weight, const int32_t* offsets,
                                        ActIn grad_out, ActOut grad_x, float* grad_weight,
                                        int64_t rows, int64_t groups, int64_t m, int64_t k,
                                        bool overwrite_x, cudaStream_t stream);

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_MOE_KERNELS_H_
