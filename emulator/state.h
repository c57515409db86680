// The emulated device's state, shared by the runtime's files (runtime.cc:
// errors and memory; streams.cc: the work queue, events, capture and
// graphs; cublaslt.cc). Internal to emulator/.
#ifndef SMALLEM_EMULATOR_STATE_H_
#define SMALLEM_EMULATOR_STATE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace smallem::emu {

struct DeviceState {
  std::mutex mu;  // guards the allocation maps
  cudaError_t last_error = cudaSuccess;
  cudaError_t sticky = cudaSuccess;
  std::string fault;
  std::map<uintptr_t, size_t> allocations;  // device: base → bytes
  std::map<uintptr_t, size_t> pinned;       // cudaHostAlloc: base → bytes
  size_t allocated_bytes = 0;
  std::map<const void*, size_t> max_dynamic_smem;
  uint64_t schedule_seed = 0;
  uint64_t launches = 0;
};

DeviceState& State();

// Records e as the last error (the first one since cudaGetLastError) and
// returns it.
cudaError_t Record(cudaError_t e);
// Makes e sticky with `fault` as its description (printed to stderr).
void Fault(cudaError_t e, const std::string& fault);

// Whether [p, p + bytes) lies inside one live device allocation, or inside
// one page-locked host allocation.
bool IsDeviceRange(const void* p, size_t bytes);
bool IsPinnedRange(const void* p, size_t bytes);

// A piece of device work: a kernel's grid, a copy, a set, an event record.
using Work = std::function<void()>;

// Puts `work` on `stream`: into the stream's graph while it is being
// captured, else at the end of the device's queue, which runs at the next
// synchronizing call (Drain). Work queued on any stream runs in the order
// it was queued, a legal order for the device's streams.
void Enqueue(cudaStream_t stream, Work work);
// Runs all queued work. Returns the sticky error, cudaSuccess if none.
cudaError_t Drain();
// cudaDeviceReset: forgets the queued work.
void DropQueued();
// A call this thread may not make while one of its streams is capturing
// (cudaStreamCaptureModeThreadLocal): when one is, invalidates that capture
// and returns cudaErrorStreamCaptureUnsupported; else cudaSuccess.
cudaError_t RefuseWhileCapturing();
// Whether `stream` is being captured.
bool IsCapturing(cudaStream_t stream);

}  // namespace smallem::emu

#endif  // SMALLEM_EMULATOR_STATE_H_
