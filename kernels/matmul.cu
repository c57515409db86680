// Batched GEMM through cuBLASLt (see matmul.h), plus the small kernels it
// needs: staging (f32 → bf16 for kBf16, bf16 → f32 for kF32, and a kF32
// product's bf16 out through f32) and out *= beta for empty products (k = 0).
//
// cuBLASLt's CUBLAS_COMPUTE_32F (f32 scale) takes A and B of one type: bf16
// with C = D bf16 or f32, or f32 with C = D f32. So kBf16 stages only its f32
// inputs and writes either out directly, while kF32 computes a bf16 out in f32.
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

#include "kernels/activation.cuh"
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

// dst[i] = src[i], bf16 widened to f32 (exactly).
__global__ void WidenKernel(const __nv_bfloat16* src, float* dst, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = __bfloat162float(src[i]);
  }
}

// Between a bf16 out, whose `batch` items of rows_cols elements lie
// stride_out apart, and its compact f32 copy `staged` (items rows_cols
// apart): staged = out widened, or out = staged rounded (`to_out`).
__global__ void CopyOutKernel(__nv_bfloat16* out, float* staged, int64_t batch,
                              int64_t rows_cols, int64_t stride_out, bool to_out) {
  const int64_t count = batch * rows_cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    __nv_bfloat16* p = out + (i / rows_cols) * stride_out + i % rows_cols;
    if (to_out) {
      *p = __float2bfloat16_rn(staged[i]);
    } else {
      staged[i] = __bfloat162float(*p);
    }
  }
}

// out[i] (m, n) = beta·out[i] for each batch item (0 when beta is 0, as BLAS
// never reads out then).
__global__ void ScaleOutKernel(ActOut out, int64_t batch, int64_t rows_cols,
                               int64_t stride_out, float beta) {
  const int64_t count = batch * rows_cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = (i / rows_cols) * stride_out + i % rows_cols;
    Store(out, p, beta == 0.0f ? 0.0f : beta * Load(out, p));
  }
}

size_t ElementSize(bool bf16) { return bf16 ? sizeof(__nv_bfloat16) : sizeof(float); }

// x advanced by `elements` of its own type.
ActIn Advanced(ActIn x, int64_t elements) {
  return {static_cast<const char*>(x.data) + elements * static_cast<int64_t>(ElementSize(x.bf16)),
          x.bf16};
}
ActOut Advanced(ActOut x, int64_t elements) {
  return {static_cast<char*>(x.data) + elements * static_cast<int64_t>(ElementSize(x.bf16)),
          x.bf16};
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

// Plan key: shape, transposes, batch layout, precision, operand types and
// alignments.
using PlanKey = std::array<int64_t, 16>;

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

// Fills `plan` for args (already in cuBLASLt's column-major terms below):
// a and b bf16 (`bf16`) or f32, out bf16 (`out_bf16`) or f32.
cublasStatus_t BuildPlan(cublasLtHandle_t handle, const MatmulArgs& args, bool bf16,
                         bool out_bf16, const uint32_t alignments[3], size_t workspace_bytes,
                         Plan* plan) {
  const cudaDataType input_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType output_type = out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
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
  SMALLEM_BLAS_TRY(MakeLayout(output_type, n, m, n, args.batch, args.stride_out, &plan->c));

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
  if (staging_out_ != nullptr) cudaFree(staging_out_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

size_t MatmulContext::device_bytes() const {
  return workspace_bytes_ + staging_a_bytes_ + staging_b_bytes_ + staging_out_bytes_;
}

cudaError_t MatmulContext::Reserve(size_t bytes, void** staging, size_t* capacity,
                                   cudaStream_t stream) {
  if (bytes <= *capacity) return cudaSuccess;
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
  return cudaSuccess;
}

cudaError_t MatmulContext::Stage(ActIn src, int64_t count, bool to_bf16, void** staging,
                                 size_t* capacity, const void** staged, cudaStream_t stream) {
  if (src.bf16 == to_bf16) {
    *staged = src.data;
    return cudaSuccess;
  }
  if (cudaError_t e = Reserve(static_cast<size_t>(count) * ElementSize(to_bf16), staging,
                              capacity, stream);
      e != cudaSuccess) {
    return e;
  }
  if (to_bf16) {
    SMALLEM_LAUNCH(StageBf16Kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(
        static_cast<const float*>(src.data), static_cast<__nv_bfloat16*>(*staging), count);
  } else {
    SMALLEM_LAUNCH(WidenKernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(
        static_cast<const __nv_bfloat16*>(src.data), static_cast<float*>(*staging), count);
  }
  *staged = *staging;
  return cudaGetLastError();
}

cudaError_t MatmulContext::RunOnce(const MatmulArgs& args, MatmulPrecision precision,
                                   cudaStream_t stream) {
  const bool bf16 = precision == MatmulPrecision::kBf16;
  const void* a = nullptr;
  const void* b = nullptr;
  const int64_t a_count = Extent(args.m * args.k, args.stride_a, args.batch);
  const int64_t b_count = Extent(args.k * args.n, args.stride_b, args.batch);
  if (cudaError_t e = Stage(args.a, a_count, bf16, &staging_a_, &staging_a_bytes_, &a, stream);
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t e = Stage(args.b, b_count, bf16, &staging_b_, &staging_b_bytes_, &b, stream);
      e != cudaSuccess) {
    return e;
  }
  // f32 A and B take only an f32 C and D: a kF32 product into a bf16 out is
  // computed in compact f32 staging (items rows_cols apart) that holds out's
  // old values when beta reads them, then rounded into place.
  const bool out_staged = args.out.bf16 && !bf16;
  const bool out_bf16 = args.out.bf16 && bf16;
  const int64_t rows_cols = args.m * args.n;
  MatmulArgs layout = args;  // what cuBLASLt sees
  void* out = args.out.data;
  if (out_staged) {
    layout.stride_out = rows_cols;
    if (cudaError_t e = Reserve(static_cast<size_t>(args.batch * rows_cols) * sizeof(float),
                                &staging_out_, &staging_out_bytes_, stream);
        e != cudaSuccess) {
      return e;
    }
    out = staging_out_;
    if (args.beta != 0.0f) {
      SMALLEM_LAUNCH(CopyOutKernel, GridStrideBlocks(args.batch * rows_cols, kThreads), kThreads, 0, stream)(
          static_cast<__nv_bfloat16*>(args.out.data), static_cast<float*>(staging_out_),
          args.batch, rows_cols, args.stride_out, /*to_out=*/false);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
  }
  const size_t input_size = ElementSize(bf16);
  const uint32_t alignments[3] = {
      AlignmentOf(a, layout.stride_a, layout.batch, input_size),
      AlignmentOf(b, layout.stride_b, layout.batch, input_size),
      AlignmentOf(out, layout.stride_out, layout.batch, ElementSize(out_bf16)),
  };
  const PlanKey key = {layout.m,        layout.n,        layout.k,
                       layout.trans_a,  layout.trans_b,  layout.batch,
                       layout.stride_a, layout.stride_b, layout.stride_out,
                       bf16,            args.a.bf16,     args.b.bf16,
                       args.out.bf16,   alignments[0],   alignments[1],
                       alignments[2]};
  auto it = plans_->plans.find(key);
  if (it == plans_->plans.end()) {
    auto [inserted, unused] = plans_->plans.try_emplace(key);
    const cublasStatus_t status = BuildPlan(handle_, layout, bf16, out_bf16, alignments,
                                            workspace_bytes_, &inserted->second);
    if (status != CUBLAS_STATUS_SUCCESS) {
      plans_->plans.erase(inserted);
      blas_status_ = status;
      return status == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported : cudaErrorUnknown;
    }
    it = inserted;
  }
  const Plan& plan = it->second;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, plan.desc, &args.alpha, b, plan.a, a, plan.b, &args.beta, out,
                     plan.c, out, plan.c, &plan.algo, workspace_, workspace_bytes_, stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    blas_status_ = status;
    return status == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported : cudaErrorUnknown;
  }
  ++launches_;
  if (out_staged) {
    SMALLEM_LAUNCH(CopyOutKernel, GridStrideBlocks(args.batch * rows_cols, kThreads), kThreads, 0, stream)(
        static_cast<__nv_bfloat16*>(args.out.data), static_cast<float*>(staging_out_),
        args.batch, rows_cols, args.stride_out, /*to_out=*/true);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

cudaError_t MatmulContext::Run(const MatmulArgs& args, MatmulPrecision precision,
                               cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return cudaSuccess;
  if (args.k <= 0) {
    // An empty sum: out = beta·out (BLAS semantics).
    SMALLEM_LAUNCH(ScaleOutKernel, GridStrideBlocks(args.batch * args.m * args.n, kThreads), kThreads, 0, stream)(args.out, args.batch, args.m * args.n, args.stride_out,
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
      item.a = Advanced(work.a, i * work.stride_a);
      item.b = Advanced(work.b, i * work.stride_b);
      item.out = Advanced(work.out, i * work.stride_out);
      item.batch = 1;
      if (cudaError_t e = run(item); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  if (work.batch > 1 && work.batch > INT32_MAX) return cudaErrorInvalidValue;
  return run(work);
}

}  // namespace smallem::cuda
