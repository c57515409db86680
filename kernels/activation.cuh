// Device access to activation operands (kernels.h: ActIn, ActOut): f32 or bf16
// elements, read as f32, rounded to nearest-even bf16 once when stored. The
// element type is a runtime flag, uniform across a launch, so one kernel
// serves every mix of operand types at the cost of a branch the whole grid
// takes the same way. Nothing here launches anything.
#ifndef SMALLEM_KERNELS_ACTIVATION_CUH_
#define SMALLEM_KERNELS_ACTIVATION_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernels.h"

namespace smallem::cuda {

__device__ __forceinline__ float Load(ActIn a, int64_t i) {
  return a.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(a.data)[i])
                : static_cast<const float*>(a.data)[i];
}

__device__ __forceinline__ float Load(ActOut a, int64_t i) {
  return Load(ActIn{a.data, a.bf16}, i);
}

__device__ __forceinline__ void Store(ActOut a, int64_t i, float v) {
  if (a.bf16) {
    static_cast<__nv_bfloat16*>(a.data)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(a.data)[i] = v;
  }
}

// a[i] += v: the sum in f32, rounded once (a backward's accumulation).
__device__ __forceinline__ void Accumulate(ActOut a, int64_t i, float v) {
  Store(a, i, Load(a, i) + v);
}

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_ACTIVATION_CUH_
