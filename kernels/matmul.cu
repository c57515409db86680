// Batched GEMM through cuBLASLt (see matmul.h), plus the two small kernels
// it needs: f32 → bf16 staging and out *= beta for empty products (k = 0).
//
// Row-major to column-major: a row-major (r, c) matrix is the column-major
// (c, r) matrix of the same memory, its transpose. So out = op(a)·op(b)
// (row-major, (m, n)) is computed as the column-major product
// outᵀ = op(b)ᵀ·op(a)ᵀ: cuBLASLt's A is our b, its B is our a, and its
// (m, n) are our (n, m).
#include "kernels/matmul.h"

#include <cuda_bf16.h>

#include <array>
#include <map>

#include "kernels/device_util.cuh"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;
// cuBLAS's recommendation for Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// dst[i] = bf16(src[i]), round to nearest even.
__global__ void StageBf16Kernel(const float* src, __nv_bfloat16* dst, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = __float2bfloat16_rn(src[i]);
  }
}

// out[i] (m, n) = beta·out[i] for each batch item (0 when beta is 0, as BLAS
// never reads out then).
__global__ void ScaleOutKernel(float* out, int64_t batch, int64_t rows_cols,
                               int64_t stride_out, float beta) {
  const int64_t count = batch * rows_cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    float* p = out + (i / rows_cols) * stride_out + i % rows_cols;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

// The largest power of two (at most 256) dividing the address of every
// batch item: what cuBLASLt may assume about alignment.
uint32_t AlignmentOf(const void* ptr, int64_t stride, int64_t batch, size_t element) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr);
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * element;
  uint32_t alignment = 256;
  while (alignment > 1 && (bits & (alignment - 1)) != 0) alignment >>= 1;
  return alignment;
}

// Elements spanned by `batch` items of `per_item` elements `stride` apart.
int64_t Extent(int64_t per_item, int64_t stride, int64_t batch) {
  return (batch - 1) * stride + per_item;
}

// Plan key: shape, transposes, batch layout, precision and alignments.
using PlanKey = std::array<int64_t, 13>;

// cuBLASLt descriptors and the chosen algorithm for one PlanKey.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

#define SMALLEM_BLAS_TRY(call)                          \
  do {                                                  \
    const cublasStatus_t status_ = (call);              \
    if (status_ != CUBLAS_STATUS_SUCCESS) return status_; \
  } while (0)

cublasStatus_t MakeLayout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld,
                          int64_t batch, int64_t stride,
                          cublasLtMatrixLayout_t* layout) {
  SMALLEM_BLAS_TRY(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    SMALLEM_BLAS_TRY(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    SMALLEM_BLAS_TRY(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Fills `plan` for args (already in cuBLASLt's column-major terms below).
cublasStatus_t BuildPlan(cublasLtHandle_t handle, const MatmulArgs& args, bool bf16,
                         const uint32_t alignments[3], size_t workspace_bytes,
                         Plan* plan) {
  const cudaDataType input_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  SMALLEM_BLAS_TRY(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt A = our b, B = our a.
  const cublasOperation_t op_a = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SMALLEM_BLAS_TRY(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                  &op_a, sizeof(op_a)));
  SMALLEM_BLAS_TRY(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                  &op_b, sizeof(op_b)));
  // Stored (column-major) shapes: our b is (k, n) row-major, i.e. (n, k)
  // column-major, or (k, n) column-major when transposed; likewise a.
  const int64_t m = args.m, n = args.n, k = args.k;
  if (!args.trans_b) {
    SMALLEM_BLAS_TRY(MakeLayout(input_type, n, k, n, args.batch, args.stride_b, &plan->a));
  } else {
    SMALLEM_BLAS_TRY(MakeLayout(input_type, k, n, k, args.batch, args.stride_b, &plan->a));
  }
  if (!args.trans_a) {
    SMALLEM_BLAS_TRY(MakeLayout(input_type, k, m, k, args.batch, args.stride_a, &plan->b));
  } else {
    SMALLEM_BLAS_TRY(MakeLayout(input_type, m, k, m, args.batch, args.stride_a, &plan->b));
  }
  SMALLEM_BLAS_TRY(MakeLayout(CUDA_R_32F, n, m, n, args.batch, args.stride_out, &plan->c));

  cublasLtMatmulPreference_t preference = nullptr;
  SMALLEM_BLAS_TRY(cublasLtMatmulPreferenceCreate(&preference));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes));
  // cuBLASLt A is our b: alignments are {a, b, out} in our terms.
  const std::array<std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t>, 4> aligned = {{
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments[1]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments[0]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments[2]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments[2]},
  }};
  for (const auto& [attribute, value] : aligned) {
    if (status != CUBLAS_STATUS_SUCCESS) break;
    status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value));
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->c,
                                            plan->c, preference, 1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  plan->algo = result.algo;
  return CUBLAS_STATUS_SUCCESS;
}

#undef SMALLEM_BLAS_TRY

}  // namespace

struct MatmulContext::PlanCache {
  std::map<PlanKey, Plan> plans;
};

cudaError_t MatmulContext::Create(std::unique_ptr<MatmulContext>* out) {
  std::unique_ptr<MatmulContext> context(new MatmulContext());
  context->plans_ = std::make_unique<PlanCache>();
  if (cublasStatus_t s = cublasLtCreate(&context->handle_); s != CUBLAS_STATUS_SUCCESS) {
    context->handle_ = nullptr;
    context->blas_status_ = s;
    return cudaErrorUnknown;
  }
  if (cudaError_t e = cudaMalloc(&context->workspace_, kWorkspaceBytes); e != cudaSuccess) {
    context->workspace_ = nullptr;
    return e;
  }
  ++context->allocations_;
  context->workspace_bytes_ = kWorkspaceBytes;
  *out = std::move(context);
  return cudaSuccess;
}

MatmulContext::~MatmulContext() {
  plans_.reset();  // descriptors before the handle
  if (staging_a_ != nullptr) cudaFree(staging_a_);
  if (staging_b_ != nullptr) cudaFree(staging_b_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

size_t MatmulContext::device_bytes() const {
  return workspace_bytes_ + staging_a_bytes_ + staging_b_bytes_;
}

cudaError_t MatmulContext::Stage(const float* src, int64_t count, void** staging,
                                 size_t* capacity, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(__nv_bfloat16);
  if (bytes > *capacity) {
    // The old buffer may still be read by queued work.
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
    // Grow geometrically so a step's varying shapes settle after a few calls.
    const size_t grown = std::max(bytes, *capacity * 2);
    if (*staging != nullptr) cudaFree(*staging);
    *staging = nullptr;
    *capacity = 0;
    if (cudaError_t e = cudaMalloc(staging, grown); e != cudaSuccess) {
      *staging = nullptr;
      return e;
    }
    ++allocations_;
    *capacity = grown;
  }
  StageBf16Kernel<<<GridStrideBlocks(count, kThreads), kThreads, 0, stream>>>(
      src, static_cast<__nv_bfloat16*>(*staging), count);
  return cudaGetLastError();
}

cudaError_t MatmulContext::RunOnce(const MatmulArgs& args, MatmulPrecision precision,
                                   cudaStream_t stream) {
  const bool bf16 = precision == MatmulPrecision::kBf16;
  const void* a = args.a;
  const void* b = args.b;
  if (bf16) {
    const int64_t a_count = Extent(args.m * args.k, args.stride_a, args.batch);
    const int64_t b_count = Extent(args.k * args.n, args.stride_b, args.batch);
    if (cudaError_t e = Stage(args.a, a_count, &staging_a_, &staging_a_bytes_, stream);
        e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = Stage(args.b, b_count, &staging_b_, &staging_b_bytes_, stream);
        e != cudaSuccess) {
      return e;
    }
    a = staging_a_;
    b = staging_b_;
  }
  const size_t input_size = bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
  const uint32_t alignments[3] = {
      AlignmentOf(a, args.stride_a, args.batch, input_size),
      AlignmentOf(b, args.stride_b, args.batch, input_size),
      AlignmentOf(args.out, args.stride_out, args.batch, sizeof(float)),
  };
  const PlanKey key = {args.m,        args.n,        args.k,
                       args.trans_a,  args.trans_b,  args.batch,
                       args.stride_a, args.stride_b, args.stride_out,
                       bf16,          alignments[0], alignments[1],
                       alignments[2]};
  auto it = plans_->plans.find(key);
  if (it == plans_->plans.end()) {
    auto [inserted, unused] = plans_->plans.try_emplace(key);
    const cublasStatus_t status =
        BuildPlan(handle_, args, bf16, alignments, workspace_bytes_, &inserted->second);
    if (status != CUBLAS_STATUS_SUCCESS) {
      plans_->plans.erase(inserted);
      blas_status_ = status;
      return status == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported : cudaErrorUnknown;
    }
    it = inserted;
  }
  const Plan& plan = it->second;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, plan.desc, &args.alpha, b, plan.a, a, plan.b, &args.beta,
                     args.out, plan.c, args.out, plan.c, &plan.algo, workspace_,
                     workspace_bytes_, stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    blas_status_ = status;
    return status == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported : cudaErrorUnknown;
  }
  ++launches_;
  return cudaSuccess;
}

cudaError_t MatmulContext::Run(const MatmulArgs& args, MatmulPrecision precision,
                               cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return cudaSuccess;
  if (args.k <= 0) {
    // An empty sum: out = beta·out (BLAS semantics).
    ScaleOutKernel<<<GridStrideBlocks(args.batch * args.m * args.n, kThreads), kThreads, 0,
                     stream>>>(args.out, args.batch, args.m * args.n, args.stride_out,
                               args.beta);
    return cudaGetLastError();
  }
  MatmulArgs work = args;
  // A broadcast b with contiguous a and out items is one taller product.
  if (work.batch > 1 && work.stride_b == 0 && !work.trans_a &&
      work.stride_a == work.m * work.k && work.stride_out == work.m * work.n) {
    work.m *= work.batch;
    work.batch = 1;
  }
  auto run = [&](const MatmulArgs& item) {
    cudaError_t e = RunOnce(item, precision, stream);
    // Shapes without a bf16 algorithm (rare, e.g. odd leading dimensions)
    // fall back to f32: more precise, never wrong.
    if (e == cudaErrorNotSupported && precision == MatmulPrecision::kBf16) {
      e = RunOnce(item, MatmulPrecision::kF32, stream);
    }
    return e;
  };
  // Other broadcasts go item by item rather than rely on a zero batch
  // stride inside cuBLASLt.
  if (work.batch > 1 && (work.stride_a == 0 || work.stride_b == 0)) {
    for (int64_t i = 0; i < work.batch; ++i) {
      MatmulArgs item = work;
      item.a = work.a + i * work.stride_a;
      item.b = work.b + i * work.stride_b;
      item.out = work.out + i * work.stride_out;
      item.batch = 1;
      if (cudaError_t e = run(item); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  if (work.batch > 1 && work.batch > INT32_MAX) return cudaErrorInvalidValue;
  return run(work);
}

}  // namespace smallem::cuda
