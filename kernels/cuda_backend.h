// CudaBackend: the engine's Backend on one NVIDIA GPU.
//
// Every op is enqueued on the backend's one stream and returns at once;
// CopyToHost and Synchronize wait for the stream. Tensor memory is plain
// cudaMalloc memory (zeroed on allocation). Matmuls go through cuBLASLt in
// the precision set by set_matmul_precision, and so do attention's products:
// kF32 runs kernels/attention.cu (f32), kBf16 kernels/attention_bf16.cu
// (tensor cores). Every other op computes in f32 (kernels/*.cu), so kF32
// mode matches the CPU reference to ~1e-5 and kBf16 to ~1e-2.
//
// A kernel launch error, or a shape that breaks an op's contract, is a broken
// invariant: CHECK (abort with file, line and the CUDA error). Errors raised
// while a kernel runs (a trap on an out-of-range token id, a bad address)
// are sticky in CUDA and abort at the next CHECKed call; the worker runs
// jobs in a child process so that such a failure fails the job only.
//
// Graphs (Backend::CaptureGraph): the stream is captured in thread-local
// mode, and every call that cannot be recorded — Allocate, Free, scratch or
// bf16 staging growth, CopyToHost, Synchronize, WaitStaged — is a CHECK
// failure that says so. A CopyToDevice while capturing reads a copy of its
// host bytes kept in page-locked memory the backend holds until
// ReleaseGraphs; when that memory is short, the capture is discarded, the
// memory grown and the step recorded again. UploadStaged records an event
// after its copy (an external event node in a graph), which WaitStaged
// waits for.
//
// Not thread-safe: one caller at a time, on a thread whose current device is
// this backend's (CreateCudaBackend makes it current on the calling thread).
//
// Defined in cuda_backend.cc (creation, memory, copies, staging), cuda_graphs.cc
// and cuda_ops.cc (the ops, checked as the CPU checks them: engine/op_checks.h).
#ifndef SMALLEM_KERNELS_CUDA_BACKEND_H_
#define SMALLEM_KERNELS_CUDA_BACKEND_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/op_list.h"
#include "kernels/matmul.h"

namespace smallem {

// What the matmuls and attention's products multiply in: kF32 (true f32 on
// the operands' values, f32 or bf16; the parity mode) or kBf16 (f32 inputs
// rounded to bf16, bf16 ones used as they are, f32 accumulation, the output
// stored in its own type; the speed mode).
using MatmulPrecision = cuda::MatmulPrecision;

// The precision training runs use on a GPU (`smallemctl train --device
// cuda:N`, the worker): the speed mode. Every run of one device class uses
// the same, so their losses and times compare; the parity tests ask for kF32
// explicitly.
inline constexpr MatmulPrecision kTrainingMatmulPrecision = MatmulPrecision::kBf16;

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int device() const { return device_; }
  MatmulPrecision matmul_precision() const { return matmul_precision_; }
  void set_matmul_precision(MatmulPrecision precision) { matmul_precision_ = precision; }
  cudaStream_t stream() const { return stream_; }

  std::string Name() const override;         // "cuda:0"
  std::string DeviceClass() const override;  // "NVIDIA H200"
  // Dense bf16 tensor-core peak for H100/H200 (989 TFLOP/s), 0 elsewhere.
  double PeakFlops() const override;
  // bf16 in the speed mode (bf16 matmuls), f32 in the parity mode.
  DType ActivationDType() const override {
    return matmul_precision_ == MatmulPrecision::kBf16 ? DType::kBF16 : DType::kF32;
  }

  // cudaMalloc'd, zeroed (in stream order), 256-byte aligned. Out of memory
  // is ResourceExhausted with the size asked and the bytes already held.
  absl::Status CheckAttentionHeadDim(int64_t head_dim) const override;  // 32, 64 or 128

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  // src may be reused when this returns (pageable memory is staged).
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  // Waits for every queued op, then copies.
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void Fill(Tensor t, float value) override;  // f32, bf16 or i32
  void Synchronize() override;
  // High-water mark of tensor memory plus the backend's own buffers
  // (cuBLASLt workspace, bf16 staging, scratch).
  size_t PeakMemoryBytes() const override { return peak_bytes_; }
  // cudaHostAlloc'd (page-locked), zeroed.
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override;
  void FreeStaging(void* ptr) override;  // waits for the stream first
  void UploadStaged(void* dst, const void* src, size_t bytes) override;
  void WaitStaged() override;
  bool SupportsGraphs() const override { return true; }
  absl::StatusOr<int> CaptureGraph(const std::function<void()>& record) override;
  void LaunchGraph(int graph) override;
  void ReleaseGraphs() override;

  // Device and page-locked allocations made so far (cudaMalloc and
  // cudaHostAlloc calls, the cuBLASLt context's included): constant across
  // training steps once the warm-up has sized every buffer.
  int64_t allocation_count() const { return allocations_made_ + matmul_->allocations(); }
  // cublasLtMatmul calls so far (a batched Matmul with strided items is one).
  int64_t matmul_launches() const { return matmul_->launches(); }
  // Graphs captured and not released.
  int graph_count() const { return static_cast<int>(graphs_.size()); }

  // Every op of engine/op_list.h (kernels/cuda_ops.cc). Attention takes
  // head sizes 32, 64 and 128 (kernels/kernels.h: kAttentionHeadDims).
  SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_OP_OVERRIDE)

 private:
  friend absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
      int device, MatmulPrecision precision);
  CudaBackend(int device, std::string device_class, cudaStream_t stream,
              cudaEvent_t upload_done, std::unique_ptr<cuda::MatmulContext> matmul);

  // At least `floats` floats of device scratch, valid until the next call;
  // grows (after a stream sync) when too small.
  float* Scratch(size_t floats);
  void Reduce(const ReduceParams& p, bool squares);
  void UpdatePeak();
  // CHECKs that no capture is under way: `what` cannot be recorded.
  void CheckNotCapturing(const char* what) const;
  // While capturing: a page-locked copy of src that lives as long as the
  // graph, or null when the snapshot memory is too small (the capture is
  // then redone with more).
  const void* Snapshot(const void* src, size_t bytes);

  // Page-locked memory holding the host bytes of copies recorded in graphs.
  struct SnapshotBlock {
    char* data = nullptr;
    size_t size = 0;
  };

  int device_;
  std::string device_class_;
  cudaStream_t stream_;
  cudaEvent_t upload_done_;  // recorded after each UploadStaged
  std::unique_ptr<cuda::MatmulContext> matmul_;
  MatmulPrecision matmul_precision_ = MatmulPrecision::kF32;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
  absl::flat_hash_map<void*, size_t> allocations_;
  absl::flat_hash_map<void*, size_t> staging_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
  int64_t allocations_made_ = 0;  // cudaMalloc and cudaHostAlloc calls

  bool capturing_ = false;
  std::vector<cudaGraphExec_t> graphs_;
  std::vector<SnapshotBlock> snapshots_;  // the last one is being filled
  size_t snapshot_used_ = 0;              // bytes used in snapshots_.back()
  size_t snapshot_asked_ = 0;             // bytes the current capture asked for
  bool snapshot_short_ = false;           // the current capture ran out
};

// A CudaBackend on `device` (0-based), made current on the calling thread,
// its matmuls in `precision` (changeable later through set_matmul_precision).
// Unavailable (with the CUDA error) when there is no driver or no GPU;
// InvalidArgument when the index is out of range.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    int device = 0, MatmulPrecision precision = MatmulPrecision::kF32);

}  // namespace smallem

#endif  // SMALLEM_KERNELS_CUDA_BACKEND_H_
