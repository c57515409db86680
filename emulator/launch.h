// The emulated device's kernel launch: SMALLEM_LAUNCH (kernels/launch.cuh)
// becomes Launcher(kernel, "Kernel", grid, block, smem, stream)(args...).
// The launch is checked against an H200's limits, then runs every block of
// the grid on the calling thread, each CUDA thread of a block a fiber
// (emulator/simt.cc). Launch errors and faults surface as on the device:
// through cudaGetLastError, and a fault is sticky.
#ifndef SMALLEM_EMULATOR_LAUNCH_H_
#define SMALLEM_EMULATOR_LAUNCH_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <utility>

namespace smallem::emu {

struct LaunchSpec {
  const void* kernel;  // identity, for cudaFuncSetAttribute
  const char* name;    // as written at the launch site
  dim3 grid, block;
  size_t dynamic_smem;
  cudaStream_t stream;
};

// Runs `thread_body` once per CUDA thread of spec's grid. Records a launch
// error or a fault for cudaGetLastError; never throws.
void Run(const LaunchSpec& spec, const std::function<void()>& thread_body);

// The current block's dynamic shared memory, `align`-aligned; fresh bytes
// are a NaN pattern (initcheck: a kernel that reads before it writes sees
// NaN).
void* DynamicShared(size_t align);

template <typename... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, size_t smem,
           cudaStream_t stream)
      : kernel_(kernel),
        spec_{reinterpret_cast<const void*>(kernel), name, grid, block, smem, stream} {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    // Converted once, as the kernel's parameters; each thread gets a copy.
    const std::tuple<Params...> params(std::forward<Args>(args)...);
    Run(spec_, [&] { std::apply(kernel_, params); });
  }

 private:
  void (*kernel_)(Params...);
  LaunchSpec spec_;
};

}  // namespace smallem::emu

#endif  // SMALLEM_EMULATOR_LAUNCH_H_
