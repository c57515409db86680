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
// Not thread-safe: one caller at a time, on a thread whose current device is
// this backend's (CreateCudaBackend makes it current on the calling thread).
#ifndef SMALLEM_KERNELS_CUDA_BACKEND_H_
#define SMALLEM_KERNELS_CUDA_BACKEND_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "kernels/matmul.h"

namespace smallem {

// What the matmuls and attention's products multiply in: kF32 (true f32;
// the parity mode) or kBf16 (inputs rounded to bf16, f32 accumulation and
// output; the speed mode).
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
  bool Supports(Op op) const override { return op != Op::kCount; }

  // cudaMalloc'd, zeroed (in stream order), 256-byte aligned. Out of memory
  // is ResourceExhausted with the size asked and the bytes already held.
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

  void Matmul(const MatmulParams& p) override;
  void Add(const BinaryParams& p) override;
  void AddBackward(const BinaryBackwardParams& p) override;
  void Mul(const BinaryParams& p) override;
  void MulBackward(const BinaryBackwardParams& p) override;
  void GeluForward(const UnaryParams& p) override;
  void GeluBackward(const UnaryBackwardParams& p) override;
  void SiluForward(const UnaryParams& p) override;
  void SiluBackward(const UnaryBackwardParams& p) override;
  void SwiGluForward(const SwiGluParams& p) override;
  void SwiGluBackward(const SwiGluBackwardParams& p) override;
  void BiasAdd(const BiasAddParams& p) override;
  void BiasBackward(const BiasBackwardParams& p) override;
  void LayerNormForward(const NormParams& p) override;
  void LayerNormBackward(const NormBackwardParams& p) override;
  void RmsNormForward(const NormParams& p) override;
  void RmsNormBackward(const NormBackwardParams& p) override;
  void RopeForward(const RopeParams& p) override;
  void RopeBackward(const RopeBackwardParams& p) override;
  // Head sizes 32, 64 and 128 (kernels/kernels.h: kAttentionHeadDims).
  void AttentionForward(const AttentionParams& p) override;
  void AttentionBackward(const AttentionBackwardParams& p) override;
  void EmbeddingForward(const EmbeddingParams& p) override;
  void EmbeddingBackward(const EmbeddingBackwardParams& p) override;
  void CrossEntropyForward(const CrossEntropyParams& p) override;
  void CrossEntropyBackward(const CrossEntropyBackwardParams& p) override;
  void Sum(const ReduceParams& p) override;
  void SumSquares(const ReduceParams& p) override;
  void AdamW(const AdamWParams& p) override;

 private:
  friend absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
      int device, MatmulPrecision precision);
  CudaBackend(int device, std::string device_class, cudaStream_t stream,
              std::unique_ptr<cuda::MatmulContext> matmul);

  // At least `floats` floats of device scratch, valid until the next call;
  // grows (after a stream sync) when too small.
  float* Scratch(size_t floats);
  void Reduce(const ReduceParams& p, bool squares);
  void TrackAllocation(size_t bytes);
  void UpdatePeak();

  int device_;
  std::string device_class_;
  cudaStream_t stream_;
  std::unique_ptr<cuda::MatmulContext> matmul_;
  MatmulPrecision matmul_precision_ = MatmulPrecision::kF32;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
  absl::flat_hash_map<void*, size_t> allocations_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

// A CudaBackend on `device` (0-based), made current on the calling thread,
// its matmuls in `precision` (changeable later through set_matmul_precision).
// Unavailable (with the CUDA error) when there is no driver or no GPU;
// InvalidArgument when the index is out of range.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    int device = 0, MatmulPrecision precision = MatmulPrecision::kF32);

}  // namespace smallem

#endif  // SMALLEM_KERNELS_CUDA_BACKEND_H_
