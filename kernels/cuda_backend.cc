// CudaBackend: its creation and lifetime, device memory, copies, staging
// memory and the scratch buffer the ops share. Graphs are cuda_graphs.cc, the
// ops cuda_ops.cc.
#include "kernels/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/cuda_check.h"
#include "kernels/kernels.h"

namespace smallem {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device,
                                                            MatmulPrecision precision) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();  // not sticky; leave the runtime clean
    return absl::UnavailableError(absl::StrCat(
        "no usable CUDA device: cudaGetDeviceCount failed with ", cudaGetErrorName(e), " (",
        cudaGetErrorString(e), "); check that a GPU is visible and the NVIDIA driver is "
        "loaded (nvidia-smi)"));
  }
  if (count == 0) {
    return absl::UnavailableError("no CUDA device: the driver reports 0 GPUs");
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("cuda:", device, " does not exist; this ",
                                                   "machine has cuda:0 to cuda:", count - 1));
  }
  auto fail = [device](const char* what, cudaError_t e) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("cuda:", device, ": ", what, " failed with ",
                                               cudaGetErrorName(e), " (",
                                               cudaGetErrorString(e), ")"));
  };
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return fail("cudaSetDevice", e);
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    return fail("cudaGetDeviceProperties", e);
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return fail("cudaStreamCreate", e);
  }
  cudaEvent_t upload_done = nullptr;
  if (cudaError_t e = cudaEventCreateWithFlags(&upload_done, cudaEventDisableTiming);
      e != cudaSuccess) {
    cudaStreamDestroy(stream);
    return fail("cudaEventCreate", e);
  }
  std::unique_ptr<cuda::MatmulContext> matmul;
  if (cudaError_t e = cuda::MatmulContext::Create(&matmul); e != cudaSuccess) {
    cudaEventDestroy(upload_done);
    cudaStreamDestroy(stream);
    return fail("creating the cuBLASLt context", e);
  }
  std::unique_ptr<CudaBackend> backend(
      new CudaBackend(device, prop.name, stream, upload_done, std::move(matmul)));
  backend->set_matmul_precision(precision);
  return std::unique_ptr<Backend>(std::move(backend));
}

CudaBackend::CudaBackend(int device, std::string device_class, cudaStream_t stream,
                         cudaEvent_t upload_done, std::unique_ptr<cuda::MatmulContext> matmul)
    : device_(device),
      device_class_(std::move(device_class)),
      stream_(stream),
      upload_done_(upload_done),
      matmul_(std::move(matmul)) {
  UpdatePeak();
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  for (cudaGraphExec_t graph : graphs_) cudaGraphExecDestroy(graph);
  for (const SnapshotBlock& block : snapshots_) cudaFreeHost(block.data);
  for (const auto& [ptr, bytes] : staging_) cudaFreeHost(ptr);
  for (const auto& [ptr, bytes] : allocations_) cudaFree(ptr);
  if (scratch_ != nullptr) cudaFree(scratch_);
  matmul_.reset();
  cudaEventDestroy(upload_done_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::Name() const { return absl::StrCat("cuda:", device_); }

std::string CudaBackend::DeviceClass() const { return device_class_; }

absl::Status CudaBackend::CheckAttentionHeadDim(int64_t head_dim) const {
  if (cuda::AttentionSupportsHeadDim(head_dim)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "head size ", head_dim, " has no CUDA attention kernel (the kernels take 32, 64, 128)"));
}

double CudaBackend::PeakFlops() const {
  // Dense bf16 on the tensor cores (SXM parts); the H200 is an H100 with
  // more memory.
  if (absl::StrContains(device_class_, "H100") || absl::StrContains(device_class_, "H200")) {
    return 989e12;
  }
  return 0;
}

void CudaBackend::UpdatePeak() {
  const size_t held = live_bytes_ + scratch_floats_ * sizeof(float) + matmul_->device_bytes();
  peak_bytes_ = std::max(peak_bytes_, held);
}

void CudaBackend::CheckNotCapturing(const char* what) const {
  CHECK(!capturing_) << what << " inside a captured step (CaptureGraph): it cannot be recorded. "
                     << "Every buffer must reach its size in an uncaptured run of the same step, "
                     << "and host reads belong after LaunchGraph (SMALLEM_CUDA_GRAPHS=0 runs "
                     << "every step eagerly)";
}

absl::StatusOr<void*> CudaBackend::Allocate(size_t bytes) {
  CheckNotCapturing("Allocate");
  void* ptr = nullptr;
  // A zero-byte request still gets a distinct pointer, as on the CPU.
  const cudaError_t e = cudaMalloc(&ptr, std::max<size_t>(bytes, 256));
  if (e != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(absl::StrCat(
        Name(), ": out of device memory allocating ", bytes, " bytes (", live_bytes_,
        " held by this backend, ", free_bytes, " of ", total_bytes,
        " free on the device; ", cudaGetErrorString(e),
        "); use a smaller batch or model"));
  }
  ++allocations_made_;
  CheckCuda(cudaMemsetAsync(ptr, 0, bytes, stream_), "Allocate: zeroing");
  allocations_[ptr] = bytes;
  live_bytes_ += bytes;
  UpdatePeak();
  return ptr;
}

void CudaBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  CheckNotCapturing("Free");
  auto it = allocations_.find(ptr);
  CHECK(it != allocations_.end())
      << "Free of a pointer this backend did not allocate, or freed twice";
  live_bytes_ -= it->second;
  allocations_.erase(it);
  // Queued ops may still use ptr; cudaFree alone does not promise to wait
  // for a non-blocking stream.
  CheckCuda(cudaStreamSynchronize(stream_), "Free (a queued op failed)");
  CheckCuda(cudaFree(ptr), "Free");
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (capturing_) {
    // The graph replays this copy long after src is gone: it reads a
    // page-locked copy of the bytes as they are now (a pageable source
    // could not be recorded at all).
    src = Snapshot(src, bytes);
    if (src == nullptr) return;  // snapshot memory short: this capture is redone
  }
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "CopyToDevice");
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CheckNotCapturing("CopyToHost");
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "CopyToHost");
  CheckCuda(cudaStreamSynchronize(stream_), "CopyToHost (a queued op failed)");
}

void CudaBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const auto* d = static_cast<const char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (d < s + bytes && s < d + bytes) {
    // Overlapping ranges (memmove semantics): go through scratch.
    float* staging = Scratch((bytes + sizeof(float) - 1) / sizeof(float));
    CheckCuda(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToDevice, stream_),
              "CopyOnDevice");
    src = staging;
  }
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
            "CopyOnDevice");
}

void CudaBackend::Fill(Tensor t, float value) {
  CHECK(t.data != nullptr) << "Fill of an empty tensor";
  cuda::FillType type = cuda::FillType::kF32;
  switch (t.dtype) {
    case DType::kF32: type = cuda::FillType::kF32; break;
    case DType::kBF16: type = cuda::FillType::kBf16; break;
    case DType::kI32: type = cuda::FillType::kI32; break;
  }
  CheckCuda(cuda::LaunchFill(t.data, t.numel(), type, value, stream_), "Fill");
}

void CudaBackend::Synchronize() {
  CheckNotCapturing("Synchronize");
  CheckCuda(cudaStreamSynchronize(stream_), "Synchronize (a queued op failed)");
}

// ------------------------------------------------------------- staging

absl::StatusOr<void*> CudaBackend::AllocateStaging(size_t bytes) {
  CheckNotCapturing("AllocateStaging");
  void* ptr = nullptr;
  const size_t size = std::max<size_t>(bytes, 64);
  if (cudaError_t e = cudaHostAlloc(&ptr, size, cudaHostAllocDefault); e != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        Name(), ": cannot allocate ", bytes, " bytes of page-locked host memory (",
        cudaGetErrorString(e), ")"));
  }
  ++allocations_made_;
  std::memset(ptr, 0, size);
  staging_[ptr] = size;
  return ptr;
}

void CudaBackend::FreeStaging(void* ptr) {
  if (ptr == nullptr) return;
  CheckNotCapturing("FreeStaging");
  auto it = staging_.find(ptr);
  CHECK(it != staging_.end()) << "FreeStaging of memory AllocateStaging did not return";
  staging_.erase(it);
  // Queued copies may still read it.
  CheckCuda(cudaStreamSynchronize(stream_), "FreeStaging (a queued op failed)");
  CheckCuda(cudaFreeHost(ptr), "FreeStaging");
}

void CudaBackend::UploadStaged(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "UploadStaged");
  // In a graph the record is a node of its own (external), so that each
  // replay records the event again and WaitStaged waits for that replay's
  // copy.
  CheckCuda(cudaEventRecordWithFlags(upload_done_, stream_,
                                     capturing_ ? cudaEventRecordExternal
                                                : cudaEventRecordDefault),
            "UploadStaged: event");
}

void CudaBackend::WaitStaged() {
  CheckNotCapturing("WaitStaged");
  CheckCuda(cudaEventSynchronize(upload_done_), "WaitStaged (a queued op failed)");
}

// ------------------------------------------------------------- scratch

float* CudaBackend::Scratch(size_t floats) {
  if (floats <= scratch_floats_) return scratch_;
  CheckNotCapturing("growing the scratch buffer");
  // Queued ops may still read the old buffer.
  CheckCuda(cudaStreamSynchronize(stream_), "Scratch");
  if (scratch_ != nullptr) CheckCuda(cudaFree(scratch_), "Scratch: free");
  scratch_ = nullptr;
  scratch_floats_ = 0;
  // Rounded up to 1 MiB so that slightly larger requests do not regrow.
  constexpr size_t kGranule = (size_t{1} << 20) / sizeof(float);
  const size_t grown = (floats + kGranule - 1) / kGranule * kGranule;
  CheckCuda(cudaMalloc(&scratch_, grown * sizeof(float)), "Scratch: out of device memory");
  ++allocations_made_;
  scratch_floats_ = grown;
  UpdatePeak();
  return scratch_;
}

}  // namespace smallem
