// CheckCuda: how the CudaBackend files (kernels/cuda_*.cc) treat a failed
// CUDA call on a path that cannot fail by contract — a failed launch, or a
// sticky error left by an earlier kernel, is a broken invariant of the
// process: abort naming the call and the CUDA error. Calls that can fail for
// a caller's reason (out of memory) return a Status instead.
#ifndef SMALLEM_KERNELS_CUDA_CHECK_H_
#define SMALLEM_KERNELS_CUDA_CHECK_H_

#include <cuda_runtime.h>

#include "base/check.h"

namespace smallem {

inline void CheckCuda(cudaError_t error, const char* what) {
  CHECK(error == cudaSuccess) << what << ": " << cudaGetErrorName(error) << " ("
                              << cudaGetErrorString(error) << ")";
}

}  // namespace smallem

#endif  // SMALLEM_KERNELS_CUDA_CHECK_H_
