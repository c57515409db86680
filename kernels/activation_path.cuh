// Two compiled paths for kernels whose operands are activations (ActIn,
// ActOut): a kernel templated on `kMixed` is launched as Kernel<false> when
// every activation operand of the launch is f32, and as Kernel<true> when any
// is bf16.
//
// Kernel<false> reads and writes float directly: the code the compiler sees
// is the f32 kernel's, so f32 results keep their bits. (A dtype branch
// between a load and the arithmetic it feeds would split basic blocks and
// could change which multiply-adds get fused into FMAs.) Kernel<true> goes
// through activation.cuh's runtime flags and serves any mix of f32 and bf16
// operands. Nothing here launches anything.
#ifndef SMALLEM_KERNELS_ACTIVATION_PATH_CUH_
#define SMALLEM_KERNELS_ACTIVATION_PATH_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/activation.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {

template <bool kMixed>
__device__ __forceinline__ float LoadAct(ActIn a, int64_t i) {
  if constexpr (kMixed) {
    return Load(a, i);
  } else {
    return static_cast<const float*>(a.data)[i];
  }
}

// Stores v and returns the value stored, as a later LoadAct reads it (v
// rounded to bf16 for a bf16 operand).
template <bool kMixed>
__device__ __forceinline__ float StoreAct(ActOut a, int64_t i, float v) {
  if constexpr (kMixed) {
    if (a.bf16) {
      const __nv_bfloat16 rounded = __float2bfloat16_rn(v);
      static_cast<__nv_bfloat16*>(a.data)[i] = rounded;
      return __bfloat162float(rounded);
    }
  }
  static_cast<float*>(a.data)[i] = v;
  return v;
}

// a[i] += v, summed in f32 and rounded once (a backward's accumulation).
template <bool kMixed>
__device__ __forceinline__ void AccumulateAct(ActOut a, int64_t i, float v) {
  if constexpr (kMixed) {
    Accumulate(a, i, v);
  } else {
    static_cast<float*>(a.data)[i] += v;
  }
}

// Whether a launch needs the mixed path: some operand is bf16.
inline bool AnyBf16(std::initializer_list<bool> flags) {
  for (bool bf16 : flags) {
    if (bf16) return true;
  }
  return false;
}

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_ACTIVATION_PATH_CUH_
