// Batched GEMM through cuBLASLt: out[i] = alpha·op(a[i])·op(b[i]) + beta·out[i]
// for row-major a, b and out, each f32 or bf16 (the engine's MatmulParams,
// in raw pointers; a bf16 out is bf16(alpha·op(a)·op(b) + beta·f32(out)),
// engine/backend.h, "Activations").
//
// Two precisions: kF32 computes in true f32 on the operands' exact values
// (no TF32; the parity mode): bf16 inputs are widened into f32 staging
// buffers, and a bf16 out is computed in an f32 staging buffer (holding its
// old values when beta ≠ 0) and rounded into place. kBf16 multiplies bf16
// operands on the tensor cores with f32 accumulation: a bf16 input is used
// as it is, an f32 one is rounded to bf16 into a staging buffer first, and
// cuBLASLt writes an f32 or bf16 out directly (a bf16 out costs no extra
// pass). Plans (cuBLASLt descriptors and the heuristic's algorithm) are
// cached per shape and operand types, so a training step pays for the
// heuristic once.
//
// A MatmulContext belongs to one stream and one thread at a time. It owns
// the cuBLASLt handle, a workspace and the staging buffers (grown on demand
// with cudaMalloc after a stream sync: never while a CUDA graph is being
// captured — Run then returns the capture error — so a captured step must
// follow an uncaptured run of the same products).
#ifndef SMALLEM_KERNELS_MATMUL_H_
#define SMALLEM_KERNELS_MATMUL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/kernels.h"

namespace smallem::cuda {

enum class MatmulPrecision { kF32, kBf16 };

// Row-major operands, each f32 or bf16 (ActIn/ActOut, kernels.h); op(a[i])
// is (m, k), op(b[i]) is (k, n), out[i] is (m, n); stride_* in elements
// between batch items (0 broadcasts a or b).
struct MatmulArgs {
  ActIn a, b;
  ActOut out;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
  float alpha = 1.0f, beta = 0.0f;
};

class MatmulContext {
 public:
  // Creates the cuBLASLt handle and workspace on the current device. On
  // failure *out is untouched and the error says which call failed (a
  // cuBLAS failure is reported as cudaErrorUnknown; see blas_status()).
  static cudaError_t Create(std::unique_ptr<MatmulContext>* out);
  ~MatmulContext();
  MatmulContext(const MatmulContext&) = delete;
  MatmulContext& operator=(const MatmulContext&) = delete;

  // Enqueues the product on `stream`. Returns cudaSuccess, a CUDA error,
  // cudaErrorNotSupported when cuBLASLt has no algorithm for the shape, or
  // cudaErrorUnknown when cuBLASLt failed otherwise (blas_status() says
  // why). In kBf16, shapes without a bf16 algorithm fall back to f32.
  cudaError_t Run(const MatmulArgs& args, MatmulPrecision precision,
                  cudaStream_t stream);

  // The status of the last failing cuBLASLt call (CUBLAS_STATUS_SUCCESS if
  // none failed).
  cublasStatus_t blas_status() const { return blas_status_; }
  // Device bytes held: workspace and staging buffers.
  size_t device_bytes() const;
  // cudaMalloc calls made so far (workspace, staging growth).
  int64_t allocations() const { return allocations_; }
  // cublasLtMatmul calls made so far: one per Run, or one per item when a
  // broadcast operand makes Run go item by item.
  int64_t launches() const { return launches_; }

 private:
  struct PlanCache;
  MatmulContext() = default;

  cudaError_t RunOnce(const MatmulArgs& args, MatmulPrecision precision,
                      cudaStream_t stream);
  // Makes *staging hold at least `bytes` (growing it after a stream sync).
  cudaError_t Reserve(size_t bytes, void** staging, size_t* capacity,
                      cudaStream_t stream);
  // Copies `count` elements of src into *staging converted to bf16
  // (`to_bf16`) or f32, and returns the copy in *staged; src itself when it
  // already has that type.
  cudaError_t Stage(ActIn src, int64_t count, bool to_bf16, void** staging,
                    size_t* capacity, const void** staged, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* staging_a_ = nullptr;  // a and b converted to the precision's type
  void* staging_b_ = nullptr;
  void* staging_out_ = nullptr;  // f32 out of a kF32 product into a bf16 out
  size_t staging_a_bytes_ = 0;
  size_t staging_b_bytes_ = 0;
  size_t staging_out_bytes_ = 0;
  std::unique_ptr<PlanCache> plans_;
  cublasStatus_t blas_status_ = CUBLAS_STATUS_SUCCESS;
  int64_t allocations_ = 0;
  int64_t launches_ = 0;
};

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_MATMUL_H_
