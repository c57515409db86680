// The emulated device's kernel launch: SMALLEM_LAUNCH (kernels/launch.cuh)
// becomes Launcher(kernel, "Kernel", grid, block, smem, stream)(args...).
// The launch is checked against an H200's limits when it is made, and
// queued on its stream (emulator/streams.cc); when it runs, every block of
// the grid runs on the synchronizing thread, each CUDA thread of a block a
// fiber (emulator/simt.cc). Launch errors and faults surface as on the
// device: through cudaGetLastError, and a fault is sticky.
#ifndef SMALLEM_EMULATOR_LAUNCH_H_
#define SMALLEM_EMULATOR_LAUNCH_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
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

// Checks spec against the device's limits (a launch error is recorded for
// cudaGetLastError) and queues `thread_body`, to run once per CUDA thread of
// spec's grid. Never throws; a fault while it runs is sticky.
void Launch(const LaunchSpec& spec, std::function<void()> thread_body);

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
    // Converted once, as the kernel's parameters, and kept until the
    // launch runs (a graph replays it); each thread gets a copy.
    auto params = std::make_shared<const std::tuple<Params...>>(std::forward<Args>(args)...);
    Launch(spec_, [kernel = kernel_, params] { std::apply(kernel, *params); });
  }

 private:
  void (*kernel_)(Params...);
  LaunchSpec spec_;
};

}  // namespace smallem::emu

#endif  // SMALLEM_EMULATOR_LAUNCH_H_
