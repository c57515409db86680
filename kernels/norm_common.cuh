// What the LayerNorm and RMSNorm forwards (layer_norm.cu, rms_norm.cu) share:
// the first pass over a row, which makes the fused residual add
// sum = x + residual and gathers the row's first statistic in the same read.
// Nothing here launches anything.
#ifndef SMALLEM_KERNELS_NORM_COMMON_CUH_
#define SMALLEM_KERNELS_NORM_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {

// The rows a norm normalizes (rows, cols): sum when there is a residual
// (residual.data non-null), else x.
__device__ __forceinline__ ActIn NormInput(ActIn x, ActIn residual, ActOut sum) {
  return residual.data != nullptr ? ActIn{sum.data, sum.bf16} : x;
}

// One lane's share of the first pass over row `row` of (rows, cols) operands,
// by one warp: the lane visits columns lane, lane + 32, … in order and
// returns Σ statistic(v) over the values v it visits of the norm's input row.
// With a residual it writes sum = x + residual first (rounded once when sum
// is bf16, as Add rounds it) and v is the sum as stored, so the statistic is
// that of the row the later passes read back. Each lane reads x and residual
// at its columns before writing sum there, so sum may alias either.
template <bool kMixed, typename Statistic>
__device__ __forceinline__ float NormFirstPass(ActIn x, ActIn residual, ActOut sum,
                                               int64_t row, int64_t cols, int lane,
                                               Statistic statistic) {
  const int64_t start = row * cols;
  float partial = 0.0f;
  if (residual.data != nullptr) {
    for (int64_t c = lane; c < cols; c += kWarpSize) {
      const float s = LoadAct<kMixed>(x, start + c) + LoadAct<kMixed>(residual, start + c);
      partial += statistic(StoreAct<kMixed>(sum, start + c, s));
    }
  } else {
    for (int64_t c = lane; c < cols; c += kWarpSize) {
      partial += statistic(LoadAct<kMixed>(x, start + c));
    }
  }
  return partial;
}

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_NORM_COMMON_CUH_
