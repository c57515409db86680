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
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/gemm.h"
#include "engine/op_list.h"

namespace smallem {

class CpuBackend final : public Backend {
 public:
  // What runs attention: engine/cpu/attention_tiles.cc's register tiles
  // (builds with Highway) or BLAS products (engine/cpu/attention.cc).
  enum class AttentionKernel { kTiles, kBlas };
  struct Options {
    int threads = 0;  // <= 0: every hardware thread
    // The products' library; nullopt: the size rule of engine/cpu/gemm.h.
    cpu::GemmChoice gemm;
    // nullopt: the tiles where the build has them. Tiles in a build
    // without Highway are a programming error (ParseAttentionKernel refuses
    // the name there).
    std::optional<AttentionKernel> attention;
  };
  // "auto" (nullopt), "tiles" or "blas"; InvalidArgument naming this build's
  // choices for anything else.
  static absl::StatusOr<std::optional<AttentionKernel>> ParseAttentionKernel(
      std::string_view name);
  // Options from SMALLEM_GEMM (cpu::ParseGemmChoice's names) and
  // SMALLEM_ATTENTION (ParseAttentionKernel's), unset meaning "auto": for
  // the binaries to call once at start-up, so that a bad value is an error
  // there; nothing inside the engine reads the environment.
  static absl::StatusOr<Options> OptionsFromEnvironment(int threads = 0);

  explicit CpuBackend(int threads = 0) : CpuBackend(Options{.threads = threads}) {}
  explicit CpuBackend(const Options& options);

  int threads() const { return threads_; }

  std::string Name() const override { return "cpu"; }
  // OpenBLAS's kernel set for the products ("Haswell", "SkylakeX"; "none"
  // without OpenBLAS): chosen once per process, see engine/cpu/blas_core.cc.
  static std::string BlasCore();
  // What runs the f32 products: "onednn+openblas" (by size, the default
  // where both exist), "onednn", "openblas" or "loop" (cpu::GemmLibraryFor
  // in engine/cpu/gemm.h).
  std::string GemmLibrary() const { return cpu::GemmLibraryName(gemm_); }
  // "tiles" or "blas".
  std::string AttentionKernelName() const { return tiles_ ? "tiles" : "blas"; }
  std::string DeviceClass() const override;  // "cpu-<threads>t-<model>"
  // f32 unless set: bf16 makes every tape on this backend store activations
  // in bf16 through the reference path (engine/cpu/bf16_ops.h) — the GPU's
  // speed mode, emulated, and slower than f32 here.
  DType ActivationDType() const override { return activation_dtype_; }
  // Up to 32 MiB per call (B = 16, H = 8 at T = 256; the tiny config's
  // B = 16, H = 4, T = 128 is 4 MiB), and on the register tiles only where
  // their layout fits the buffer: engine/cpu/attention.cc.
  bool SavesAttentionProbs(int64_t batch, int64_t heads, int64_t time) const override;
  // Chunks where the head (vocab × width f32) fits in a quarter of one
  // core's L2: then a chunk's logits take another quarter, and the head's
  // gradient, accumulated chunk by chunk, a third (cpu_backend.cc); one
  // chunk of every row otherwise (each chunk would read the head again).
  int64_t HeadLossChunkRows(int64_t rows, int64_t vocab, int64_t width) const override;
  void set_activation_dtype(DType dtype) { activation_dtype_ = dtype; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void Fill(Tensor t, float value) override;
  void Synchronize() override {}
  size_t PeakMemoryBytes() const override { return peak_bytes_; }

  // Every op of engine/op_list.h, in engine/cpu/<op name>.cc (Sum and
  // SumSquares in reduce.cc).
  SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_OP_OVERRIDE)

 private:
  int threads_;
  cpu::GemmChoice gemm_;
  bool tiles_;  // attention on the register tiles
  DType activation_dtype_ = DType::kF32;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_CPU_CPU_BACKEND_H_
