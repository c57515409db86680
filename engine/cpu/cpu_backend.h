// CpuBackend: the f32 reference backend. GEMM through OpenBLAS (a plain loop
// where OpenBLAS is absent, e.g. on the GPU machine), everything else in
// plain C++ parallelized with OpenMP over rows. bf16 activations run through
// f32 copies (engine/cpu/bf16_ops.h): the reference, not a fast path.
//
// Each op's reference lives in the file of the same name as its CUDA kernel:
// engine/cpu/rms_norm.cc ↔ kernels/rms_norm.cu. Not thread-safe: one caller
// at a time (the ops themselves use `threads` worker threads).
#ifndef SMALLEM_ENGINE_CPU_CPU_BACKEND_H_
#define SMALLEM_ENGINE_CPU_CPU_BACKEND_H_

#include <cstddef>
#include <string>

#include "engine/backend.h"

namespace smallem {

class CpuBackend final : public Backend {
 public:
  // threads <= 0 means every hardware thread.
  explicit CpuBackend(int threads = 0);

  int threads() const { return threads_; }

  std::string Name() const override { return "cpu"; }
  std::string DeviceClass() const override;  // "cpu-<threads>t-<model>"
  bool Supports(Op op) const override { return true; }
  // f32 unless set: bf16 makes every tape on this backend store activations
  // in bf16 through the reference path (engine/cpu/bf16_ops.h) — the GPU's
  // speed mode, emulated, and slower than f32 here.
  DType ActivationDType() const override { return activation_dtype_; }
  void set_activation_dtype(DType dtype) { activation_dtype_ = dtype; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void Fill(Tensor t, float value) override;
  void Synchronize() override {}
  size_t PeakMemoryBytes() const override { return peak_bytes_; }

  void Matmul(const MatmulParams& p) override;                     // matmul.cc
  void Add(const BinaryParams& p) override;                        // add.cc
  void AddBackward(const BinaryBackwardParams& p) override;        // add.cc
  void Mul(const BinaryParams& p) override;                        // mul.cc
  void MulBackward(const BinaryBackwardParams& p) override;        // mul.cc
  void GeluForward(const UnaryParams& p) override;                 // gelu.cc
  void GeluBackward(const UnaryBackwardParams& p) override;        // gelu.cc
  void SiluForward(const UnaryParams& p) override;                 // silu.cc
  void SiluBackward(const UnaryBackwardParams& p) override;        // silu.cc
  void SwiGluForward(const SwiGluParams& p) override;              // swiglu.cc
  void SwiGluBackward(const SwiGluBackwardParams& p) override;     // swiglu.cc
  void BiasAdd(const BiasAddParams& p) override;                   // bias_add.cc
  void BiasBackward(const BiasBackwardParams& p) override;         // bias_add.cc
  void LayerNormForward(const NormParams& p) override;             // layer_norm.cc
  void LayerNormBackward(const NormBackwardParams& p) override;    // layer_norm.cc
  void RmsNormForward(const NormParams& p) override;               // rms_norm.cc
  void RmsNormBackward(const NormBackwardParams& p) override;      // rms_norm.cc
  void RopeForward(const RopeParams& p) override;                  // rope.cc
  void RopeBackward(const RopeBackwardParams& p) override;         // rope.cc
  void AttentionForward(const AttentionParams& p) override;        // attention.cc
  void AttentionBackward(const AttentionBackwardParams& p) override;  // attention.cc
  void EmbeddingForward(const EmbeddingParams& p) override;        // embedding.cc
  void EmbeddingBackward(const EmbeddingBackwardParams& p) override;  // embedding.cc
  void CrossEntropyForward(const CrossEntropyParams& p) override;  // cross_entropy.cc
  void CrossEntropyBackward(const CrossEntropyBackwardParams& p) override;  // cross_entropy.cc
  void Sum(const ReduceParams& p) override;                        // reduce.cc
  void SumSquares(const ReduceParams& p) override;                 // reduce.cc
  void AdamW(const AdamWParams& p) override;                       // adamw.cc
  void RowSumSquares(const RowReduceParams& p) override;           // row_sum_squares.cc
  void RowScale(const RowScaleParams& p) override;                 // row_scale.cc
  void GatherSequences(const GatherSequencesParams& p) override;   // gather_sequences.cc

 private:
  int threads_;
  DType activation_dtype_ = DType::kF32;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_CPU_CPU_BACKEND_H_
