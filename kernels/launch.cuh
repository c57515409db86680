// The one launch construct of kernels/*.cu, and the one way a kernel
// declares dynamic shared memory. Under nvcc they are the CUDA syntax itself;
// under the host compiler (the emulated device of emulator/, tests only) they
// are the emulator's launch and its per-block shared buffer, so that the same
// kernel text runs on both.
//
//   SMALLEM_LAUNCH(Kernel, grid, block, smem_bytes, stream)(args...);
//   SMALLEM_DYNAMIC_SHARED(float, smem, 16);   // float* smem, 16-byte aligned
#ifndef SMALLEM_KERNELS_LAUNCH_CUH_
#define SMALLEM_KERNELS_LAUNCH_CUH_

#if defined(__CUDACC__)
#define SMALLEM_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define SMALLEM_DYNAMIC_SHARED(type, name, align) extern __shared__ __align__(align) type name[]
#else
#include "emulator/launch.h"
#define SMALLEM_LAUNCH(kernel, grid, block, smem, stream) \
  ::smallem::emu::Launcher(kernel, #kernel, grid, block, smem, stream)
#define SMALLEM_DYNAMIC_SHARED(type, name, align) \
  type* const name = static_cast<type*>(::smallem::emu::DynamicShared(align))
#endif

#endif  // SMALLEM_KERNELS_LAUNCH_CUH_
