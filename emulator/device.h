// The emulated device's state and the controls tests use: an H200's limits,
// the sticky fault, the schedule, the allocations. Test-only.
#ifndef SMALLEM_EMULATOR_DEVICE_H_
#define SMALLEM_EMULATOR_DEVICE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "emulator/launch.h"

namespace smallem::emu {

// An H200's launch limits (compute capability 9.0).
inline constexpr int kMultiprocessors = 132;
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
inline constexpr unsigned kMaxGridDim[3] = {0x7fffffffu, 65535, 65535};
inline constexpr size_t kStaticSharedBytes = 48 * 1024;
inline constexpr size_t kOptInSharedBytes = 227 * 1024;
inline constexpr size_t kGlobalBytes = size_t{141} << 30;

// 0: blocks and threads in index order; otherwise a random order drawn from
// this seed. Default: $SMALLEM_EMU_SCHEDULE, else 0.
void SetScheduleSeed(uint64_t seed);
uint64_t ScheduleSeed();

// The fault that stopped a kernel ("Kernel: block (..) thread (..): what"),
// empty while none has. A fault is sticky, as on the device: every later
// launch and synchronizing call fails until ResetDevice.
const std::string& LastFault();
// cudaDeviceReset: clears the fault and the last error, frees nothing.
void ResetDevice();

// simt.cc: runs one block; returns the fault, empty if none.
std::string RunBlock(const LaunchSpec& spec, const std::function<void()>& body, uint3 block_idx,
                     std::mt19937_64* order);

}  // namespace smallem::emu

#endif  // SMALLEM_EMULATOR_DEVICE_H_
