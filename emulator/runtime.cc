// The emulated CUDA runtime: errors, the device, launches and memory, the
// calls kernels/ and CudaBackend make (streams, events and graphs are in
// streams.cc). Device memory is host memory from posix_memalign, filled with
// a NaN pattern when allocated (initcheck), and every runtime call that
// takes a device range checks it lies inside one live allocation; kernels'
// own accesses are checked by AddressSanitizer in the emulated build (out of
// bounds, use after free).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "emulator/device.h"
#include "emulator/state.h"

namespace smallem::emu {

DeviceState& State() {
  static DeviceState* state = [] {
    auto* s = new DeviceState;
    if (const char* seed = std::getenv("SMALLEM_EMU_SCHEDULE")) {
      s->schedule_seed = std::strtoull(seed, nullptr, 10);
    }
    return s;
  }();
  return *state;
}

cudaError_t Record(cudaError_t e) {
  DeviceState& s = State();
  if (e != cudaSuccess && s.last_error == cudaSuccess) s.last_error = e;
  return e;
}

void Fault(cudaError_t e, const std::string& fault) {
  std::fprintf(stderr, "emulated device: %s\n", fault.c_str());
  DeviceState& s = State();
  if (s.sticky != cudaSuccess) return;
  s.fault = fault;
  s.sticky = e;
  Record(e);
}

namespace {

// Whether [p, p + bytes) lies inside one of `ranges` (base → bytes).
bool Inside(const std::map<uintptr_t, size_t>& ranges, const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(State().mu);
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

}  // namespace

bool IsDeviceRange(const void* p, size_t bytes) { return Inside(State().allocations, p, bytes); }
bool IsPinnedRange(const void* p, size_t bytes) { return Inside(State().pinned, p, bytes); }

namespace {

// Checks a copy's direction and device ranges; records and returns the
// error, cudaSuccess if it may go ahead.
cudaError_t CheckCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (State().sticky != cudaSuccess) return State().sticky;
  if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice &&
      kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  // cudaMemcpyDefault (unified addressing): either side may be either.
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !IsDeviceRange(dst, bytes)) || (src_device && !IsDeviceRange(src, bytes))) {
    return Record(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

}  // namespace

void SetScheduleSeed(uint64_t seed) { State().schedule_seed = seed; }
uint64_t ScheduleSeed() { return State().schedule_seed; }
const std::string& LastFault() { return State().fault; }
void ResetDevice() {
  DropQueued();
  DeviceState& s = State();
  s.last_error = s.sticky = cudaSuccess;
  s.fault.clear();
}

namespace {

// $SMALLEM_EMU_PROFILE set: per kernel, launches, threads run and host
// time, printed to stderr at exit (what makes an emulated test slow).
struct KernelCost {
  uint64_t launches = 0, threads = 0;
  double seconds = 0;
};
std::map<std::string, KernelCost>* Profile() {
  static std::map<std::string, KernelCost>* profile = [] {
    if (std::getenv("SMALLEM_EMU_PROFILE") == nullptr) return static_cast<std::map<std::string, KernelCost>*>(nullptr);
    auto* p = new std::map<std::string, KernelCost>;
    std::atexit([] {
      std::vector<std::pair<std::string, KernelCost>> rows(Profile()->begin(), Profile()->end());
      std::sort(rows.begin(), rows.end(),
                [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
      for (const auto& [name, c] : rows) {
        std::fprintf(stderr, "emulated %-40s %8llu launches %12llu threads %8.2f s\n", name.c_str(),
                     static_cast<unsigned long long>(c.launches),
                     static_cast<unsigned long long>(c.threads), c.seconds);
      }
    });
    return p;
  }();
  return profile;
}

// Runs a launch Launch has checked: every block, in index order or the
// schedule's.
void Execute(const LaunchSpec& spec, const std::function<void()>& thread_body) {
  DeviceState& s = State();
  if (s.sticky != cudaSuccess) return;
  const auto start = std::chrono::steady_clock::now();
  struct Account {
    const LaunchSpec& spec;
    std::chrono::steady_clock::time_point start;
    ~Account() {
      if (Profile() == nullptr) return;
      KernelCost& c = (*Profile())[spec.name];
      ++c.launches;
      c.threads += uint64_t{spec.grid.x} * spec.grid.y * spec.grid.z * spec.block.x * spec.block.y *
                   spec.block.z;
      c.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } account{spec, start};
  ++s.launches;
  std::mt19937_64 order(s.schedule_seed ^ (s.launches * 0x9e3779b97f4a7c15ull));
  std::mt19937_64* shuffled = s.schedule_seed != 0 ? &order : nullptr;
  const dim3 g = spec.grid;
  const uint64_t blocks = uint64_t{g.x} * g.y * g.z;
  std::vector<uint64_t> block_order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) block_order[i] = i;
  if (shuffled != nullptr) std::shuffle(block_order.begin(), block_order.end(), *shuffled);
  for (uint64_t i : block_order) {
    const uint3 idx{static_cast<unsigned>(i % g.x), static_cast<unsigned>(i / g.x % g.y),
                    static_cast<unsigned>(i / (uint64_t{g.x} * g.y))};
    std::string fault = RunBlock(spec, thread_body, idx, shuffled);
    if (!fault.empty()) {
      // Found while the kernel ran: the launch itself succeeded, and the
      // error is sticky from here on.
      Fault(cudaErrorLaunchFailure, fault);
      return;
    }
  }
}

}  // namespace

void Launch(const LaunchSpec& spec, std::function<void()> thread_body) {
  DeviceState& s = State();
  if (s.sticky != cudaSuccess) {
    Record(s.sticky);
    return;
  }
  const dim3 g = spec.grid, b = spec.block;
  const unsigned block_dims[3] = {b.x, b.y, b.z}, grid_dims[3] = {g.x, g.y, g.z};
  for (int i = 0; i < 3; ++i) {
    if (block_dims[i] == 0 || block_dims[i] > kMaxBlockDim[i] || grid_dims[i] == 0 ||
        grid_dims[i] > kMaxGridDim[i]) {
      Record(cudaErrorInvalidConfiguration);
      return;
    }
  }
  if (uint64_t{b.x} * b.y * b.z > kMaxThreadsPerBlock) {
    Record(cudaErrorInvalidConfiguration);
    return;
  }
  size_t allowed = kStaticSharedBytes;
  if (auto it = s.max_dynamic_smem.find(spec.kernel); it != s.max_dynamic_smem.end()) {
    allowed = it->second;
  }
  if (spec.dynamic_smem > allowed) {
    Record(cudaErrorInvalidValue);
    return;
  }
  Enqueue(spec.stream, [spec, body = std::move(thread_body)] { Execute(spec, body); });
}

}  // namespace smallem::emu

using smallem::emu::Drain;
using smallem::emu::Enqueue;
using smallem::emu::Record;
using smallem::emu::RefuseWhileCapturing;
using smallem::emu::State;

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define SMALLEM_EMU_NAME(e) \
  case e: return #e;
    SMALLEM_EMU_NAME(cudaSuccess)
    SMALLEM_EMU_NAME(cudaErrorInvalidValue)
    SMALLEM_EMU_NAME(cudaErrorMemoryAllocation)
    SMALLEM_EMU_NAME(cudaErrorInvalidConfiguration)
    SMALLEM_EMU_NAME(cudaErrorInvalidDevicePointer)
    SMALLEM_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    SMALLEM_EMU_NAME(cudaErrorNoDevice)
    SMALLEM_EMU_NAME(cudaErrorInvalidDevice)
    SMALLEM_EMU_NAME(cudaErrorInvalidResourceHandle)
    SMALLEM_EMU_NAME(cudaErrorNotReady)
    SMALLEM_EMU_NAME(cudaErrorIllegalState)
    SMALLEM_EMU_NAME(cudaErrorIllegalAddress)
    SMALLEM_EMU_NAME(cudaErrorLaunchOutOfResources)
    SMALLEM_EMU_NAME(cudaErrorMisalignedAddress)
    SMALLEM_EMU_NAME(cudaErrorLaunchFailure)
    SMALLEM_EMU_NAME(cudaErrorNotSupported)
    SMALLEM_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    SMALLEM_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    SMALLEM_EMU_NAME(cudaErrorUnknown)
#undef SMALLEM_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return cudaGetErrorName(error);
  }
}

cudaError_t cudaGetLastError() {
  auto& s = State();
  const cudaError_t e = s.last_error;
  s.last_error = s.sticky;
  return e;
}
cudaError_t cudaPeekAtLastError() { return State().last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : Record(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return Record(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "NVIDIA H200 (emulated)");
  prop->totalGlobalMem = smallem::emu::kGlobalBytes;
  prop->sharedMemPerBlock = smallem::emu::kStaticSharedBytes;
  prop->sharedMemPerBlockOptin = smallem::emu::kOptInSharedBytes;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = smallem::emu::kMaxThreadsPerBlock;
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = static_cast<int>(smallem::emu::kMaxBlockDim[i]);
    prop->maxGridSize[i] = static_cast<int>(smallem::emu::kMaxGridDim[i]);
  }
  prop->multiProcessorCount = smallem::emu::kMultiprocessors;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > smallem::emu::kOptInSharedBytes) {
    return Record(cudaErrorInvalidValue);
  }
  State().max_dynamic_smem[func] = static_cast<size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  auto& s = State();
  if (s.sticky != cudaSuccess) return s.sticky;
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  if (bytes > smallem::emu::kGlobalBytes - s.allocated_bytes) {
    return Record(cudaErrorMemoryAllocation);
  }
  // 256-byte aligned as cudaMalloc's; exactly `bytes` long, so that
  // AddressSanitizer reports the first byte past the end.
  void* p = nullptr;
  if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0) {
    return Record(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xff, bytes);  // NaN pattern: reads before writes show
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  s.allocated_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  Drain();  // cudaFree waits for the device
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end()) return Record(cudaErrorInvalidValue);
  s.allocated_bytes -= it->second;
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = smallem::emu::kGlobalBytes;
  *free_bytes = smallem::emu::kGlobalBytes - State().allocated_bytes;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  void* p = nullptr;
  if (flags != cudaHostAllocDefault || posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0) {
    return Record(flags != cudaHostAllocDefault ? cudaErrorInvalidValue
                                                : cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xff, bytes);  // as fresh device memory: reads before writes show
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  Drain();  // queued copies may still read it
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.pinned.end()) return Record(cudaErrorInvalidValue);
  s.pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  if (cudaError_t e = smallem::emu::CheckCopy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (cudaError_t e = Drain(); e != cudaSuccess) return e;
  if (bytes != 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

// As the driver's (its "API synchronization behavior"): a copy from
// pageable memory reads the host bytes when called; a copy to pageable
// memory returns once done; a copy from or to page-locked memory, and a
// device-to-device copy, runs in its turn on the stream. Inside a capture a
// copy is a graph node that reads its source when it runs; one from or to
// pageable memory cannot be captured.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = smallem::emu::CheckCopy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  const bool from_pageable =
      kind == cudaMemcpyHostToDevice && !smallem::emu::IsPinnedRange(src, bytes);
  const bool to_pageable =
      kind == cudaMemcpyDeviceToHost && !smallem::emu::IsPinnedRange(dst, bytes);
  if (smallem::emu::IsCapturing(stream)) {
    if (from_pageable || to_pageable) return RefuseWhileCapturing();  // a graph cannot record it
  } else if (from_pageable) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    Enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  } else if (to_pageable) {
    if (cudaError_t e = Drain(); e != cudaSuccess) return e;
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  }
  Enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (State().sticky != cudaSuccess) return State().sticky;
  if (bytes == 0) return cudaSuccess;
  if (!smallem::emu::IsDeviceRange(ptr, bytes)) return Record(cudaErrorInvalidValue);
  Enqueue(stream, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  // Asynchronous for device memory, as the driver's.
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}
