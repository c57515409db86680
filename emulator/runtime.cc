// The emulated CUDA runtime: the calls kernels/ and CudaBackend make, over
// host memory. Work on a stream runs when it is enqueued (the emulator has
// no asynchrony: see emulator/README.md). Device memory is host memory from
// posix_memalign, filled with a NaN pattern when allocated (initcheck), and
// every runtime call that takes a device range checks it lies inside one
// live allocation; kernels' own accesses are checked by AddressSanitizer in
// the emulated build (out of bounds, use after free).
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "emulator/device.h"

struct CUstream_st {
  unsigned flags = 0;
};

namespace smallem::emu {
namespace {

struct DeviceState {
  std::mutex mu;
  cudaError_t last_error = cudaSuccess;
  cudaError_t sticky = cudaSuccess;
  std::string fault;
  std::map<uintptr_t, size_t> allocations;  // base → bytes
  std::map<const void*, size_t> max_dynamic_smem;
  uint64_t schedule_seed = 0;
  uint64_t launches = 0;
};

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

// Whether [p, p + bytes) lies inside one live allocation. REQUIRES: mu held.
bool IsDeviceRangeLocked(const void* p, size_t bytes) {
  const auto& a = State().allocations;
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(address);
  if (it == a.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

bool IsDeviceRange(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(State().mu);
  return IsDeviceRangeLocked(p, bytes);
}

cudaError_t Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (State().sticky != cudaSuccess) return State().sticky;
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: either side may be either.
  } else if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice &&
             kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  if ((dst_device && !IsDeviceRange(dst, bytes)) || (src_device && !IsDeviceRange(src, bytes))) {
    return Record(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace

void SetScheduleSeed(uint64_t seed) { State().schedule_seed = seed; }
uint64_t ScheduleSeed() { return State().schedule_seed; }
const std::string& LastFault() { return State().fault; }
void ResetDevice() {
  DeviceState& s = State();
  s.last_error = s.sticky = cudaSuccess;
  s.fault.clear();
}

void Run(const LaunchSpec& spec, const std::function<void()>& thread_body) {
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
  ++s.launches;
  std::mt19937_64 order(s.schedule_seed ^ (s.launches * 0x9e3779b97f4a7c15ull));
  std::mt19937_64* shuffled = s.schedule_seed != 0 ? &order : nullptr;
  const uint64_t blocks = uint64_t{g.x} * g.y * g.z;
  std::vector<uint64_t> block_order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) block_order[i] = i;
  if (shuffled != nullptr) std::shuffle(block_order.begin(), block_order.end(), *shuffled);
  for (uint64_t i : block_order) {
    const uint3 idx{static_cast<unsigned>(i % g.x), static_cast<unsigned>(i / g.x % g.y),
                    static_cast<unsigned>(i / (uint64_t{g.x} * g.y))};
    std::string fault = RunBlock(spec, thread_body, idx, shuffled);
    if (!fault.empty()) {
      std::fprintf(stderr, "emulated device: %s\n", fault.c_str());
      s.fault = fault;
      // Found while the kernel ran: the launch itself succeeded, and the
      // error is sticky from here on (the next synchronizing call, and
      // cudaGetLastError after this launch's, report it).
      s.sticky = cudaErrorLaunchFailure;
      return;
    }
  }
}

}  // namespace smallem::emu

using smallem::emu::Record;
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
cudaError_t cudaDeviceSynchronize() { return State().sticky; }

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
  if (bytes > smallem::emu::kGlobalBytes) return Record(cudaErrorMemoryAllocation);
  // 256-byte aligned as cudaMalloc's; exactly `bytes` long, so that
  // AddressSanitizer reports the first byte past the end.
  void* p = nullptr;
  if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0) {
    return Record(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xff, bytes);  // NaN pattern: reads before writes show
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end()) return Record(cudaErrorInvalidValue);
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return smallem::emu::Copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return smallem::emu::Copy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (State().sticky != cudaSuccess) return State().sticky;
  if (bytes == 0) return cudaSuccess;
  if (!smallem::emu::IsDeviceRange(ptr, bytes)) return Record(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(ptr, value, bytes);
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return State().sticky; }
