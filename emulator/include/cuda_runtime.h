// The emulated device's cuda_runtime.h: what kernels/*.cu and their
// launchers use of CUDA, for the host compiler. Test-only (emulator/README.md
// says what is modelled and what is not); production binaries build
// kernels/ with nvcc and the real runtime.
#ifndef SMALLEM_EMULATOR_CUDA_RUNTIME_H_
#define SMALLEM_EMULATOR_CUDA_RUNTIME_H_

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

// Qualifiers: device code is ordinary host code here.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
// Static shared memory: blocks run one at a time on the launching thread
// (emulator/simt.cc), so a function-static array is exactly one block's.
#define __shared__ static

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct float2 {
  float x, y;
};
// 16-byte aligned as on the device: a misaligned float4 access is an error
// (UBSan's alignment check in the emulated build), as it is on the GPU.
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalState = 401,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct CUstream_st;
using cudaStream_t = CUstream_st*;
inline constexpr unsigned cudaStreamDefault = 0;
inline constexpr unsigned cudaStreamNonBlocking = 1;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
inline constexpr unsigned cudaEventDefault = 0;
inline constexpr unsigned cudaEventDisableTiming = 2;
inline constexpr unsigned cudaEventRecordDefault = 0;
inline constexpr unsigned cudaEventRecordExternal = 1;
struct CUgraph_st;
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st;
using cudaGraphExec_t = CUgraphExec_st*;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
inline constexpr unsigned cudaHostAllocDefault = 0;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int multiProcessorCount;
  int major;
  int minor;
};

// Device builtins (per emulated thread; emulator/simt.cc keeps them).
namespace smallem::emu {
const uint3& ThreadIdx();
const uint3& BlockIdx();
const dim3& BlockDim();
const dim3& GridDim();
void SyncThreads(const char* file, int line);
void SyncWarp(unsigned mask, const char* file, int line);
uint64_t WarpExchange(int kind, unsigned mask, uint64_t value, int arg, int width,
                      const char* file, int line);
[[noreturn]] void Trap(const char* file, int line);
// Stops the block with a fault: `what`, at file:line.
[[noreturn]] void DeviceFault(const char* what, const char* file, int line);
enum WarpOp { kShfl, kShflXor, kShflUp, kShflDown, kBallot, kAny, kAll, kSyncWarp };
constexpr unsigned MaskOrFull() { return 0xffffffffu; }
constexpr unsigned MaskOrFull(unsigned mask) { return mask; }
constexpr int WidthOr32() { return 32; }
constexpr int WidthOr32(int width) { return width; }
template <typename T>
T WarpShuffle(int kind, unsigned mask, T value, int arg, int width, const char* file,
              int line) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &value, sizeof(T));
  bits = WarpExchange(kind, mask, bits, arg, width, file, line);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace smallem::emu

#define threadIdx (::smallem::emu::ThreadIdx())
#define blockIdx (::smallem::emu::BlockIdx())
#define blockDim (::smallem::emu::BlockDim())
#define gridDim (::smallem::emu::GridDim())
inline constexpr int warpSize = 32;
#define __syncthreads() ::smallem::emu::SyncThreads(__FILE__, __LINE__)
#define __syncwarp(...) \
  ::smallem::emu::SyncWarp(::smallem::emu::MaskOrFull(__VA_ARGS__), __FILE__, __LINE__)
#define __trap() ::smallem::emu::Trap(__FILE__, __LINE__)
#define SMALLEM_EMU_SHUFFLE(kind, mask, v, arg, ...)                                   \
  ::smallem::emu::WarpShuffle(::smallem::emu::kind, mask, v, arg,                      \
                              ::smallem::emu::WidthOr32(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_sync(mask, v, lane, ...) SMALLEM_EMU_SHUFFLE(kShfl, mask, v, lane, __VA_ARGS__)
#define __shfl_xor_sync(mask, v, lane_mask, ...) \
  SMALLEM_EMU_SHUFFLE(kShflXor, mask, v, lane_mask, __VA_ARGS__)
#define __shfl_up_sync(mask, v, delta, ...) SMALLEM_EMU_SHUFFLE(kShflUp, mask, v, delta, __VA_ARGS__)
#define __shfl_down_sync(mask, v, delta, ...) \
  SMALLEM_EMU_SHUFFLE(kShflDown, mask, v, delta, __VA_ARGS__)
#define __ballot_sync(mask, pred) \
  static_cast<unsigned>(::smallem::emu::WarpExchange(::smallem::emu::kBallot, mask, (pred) ? 1 : 0, 0, 32, __FILE__, __LINE__))
#define __any_sync(mask, pred) \
  static_cast<int>(::smallem::emu::WarpExchange(::smallem::emu::kAny, mask, (pred) ? 1 : 0, 0, 32, __FILE__, __LINE__))
#define __all_sync(mask, pred) \
  static_cast<int>(::smallem::emu::WarpExchange(::smallem::emu::kAll, mask, (pred) ? 1 : 0, 0, 32, __FILE__, __LINE__))

// Device math: the host's libm (its accuracy is not the device's; see
// emulator/README.md).
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// CUDA's integer and float min/max overloads.
template <typename A, typename B>
constexpr auto min(A a, B b) -> decltype(a + b) {
  return b < a ? b : a;
}
template <typename A, typename B>
constexpr auto max(A a, B b) -> decltype(a + b) {
  return a < b ? b : a;
}
// expf, logf, sqrtf, tanhf, fmaf, fmaxf: <math.h>'s, in the global namespace.

// The runtime subset the backend calls (emulator/runtime.cc).
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream = nullptr,
                                     unsigned flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}

#endif  // SMALLEM_EMULATOR_CUDA_RUNTIME_H_
