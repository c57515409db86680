// The emulated cuBLASLt: D = alpha·op(A)·op(B) + beta·C over column-major
// matrices, as NVIDIA documents it, for the subset kernels/matmul.cu uses.
//
// - Layouts: (type, rows, cols, ld) in column-major order, element (r, c)
//   at r + c·ld; ld < rows is CUBLAS_STATUS_INVALID_VALUE. A batch is
//   BATCH_COUNT items STRIDED_BATCH_OFFSET elements apart; A, B, C and D
//   must agree on the count.
// - op(A) is (m, k), op(B) is (k, n), C and D are (m, n); shapes that do not
//   fit are CUBLAS_STATUS_INVALID_VALUE.
// - Compute CUBLAS_COMPUTE_32F with scale type CUDA_R_32F, host pointer
//   mode (alpha and beta are read when cublasLtMatmul is called). Types:
//   A = B = f32 with C = D f32, or A = B = bf16 with C = D bf16 or f32;
//   anything else is CUBLAS_STATUS_NOT_SUPPORTED, as the library answers a
//   combination it has no kernel for (matmul.cu relies on this for its f32
//   fallback). Products accumulate in f32 in k order; a bf16 D is rounded
//   once, to nearest even. beta = 0 never reads C (BLAS).
// - The heuristic returns one algorithm needing no workspace; it records
//   the preference's minimum alignments (256 bytes by default), and a
//   cublasLtMatmul whose pointers are less aligned than the algorithm was
//   chosen for is CUBLAS_STATUS_INVALID_VALUE (a real kernel would fault or
//   read wrongly).
// - The product is queued on the stream like a kernel (and captured into a
//   graph); when it runs, a matrix that reaches outside its device
//   allocation is a sticky cudaErrorIllegalAddress naming the operand — a
//   wrong leading dimension or batch stride shows here.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "emulator/state.h"

struct cublasLtContext {};
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};

namespace {

// The algorithm's record: the alignments it was chosen for.
constexpr uint64_t kAlgoTag = 0x534d414c4c454d31ull;  // "SMALLEM1"

template <typename T>
cublasStatus_t Set(T* field, const void* buf, size_t bytes) {
  if (buf == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

size_t ElementBytes(cudaDataType type) { return type == CUDA_R_16BF ? 2 : 4; }

float LoadElement(const void* base, cudaDataType type, int64_t i) {
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

// Rows and columns of op(X) for X's layout.
void OpShape(const cublasLtMatrixLayoutOpaque_t& x, cublasOperation_t op, uint64_t* rows,
             uint64_t* cols) {
  *rows = op == CUBLAS_OP_N ? x.rows : x.cols;
  *cols = op == CUBLAS_OP_N ? x.cols : x.rows;
}

// Checks the problem: types, shapes, leading dimensions, batches.
cublasStatus_t CheckProblem(const cublasLtMatmulDescOpaque_t& desc,
                            const cublasLtMatrixLayoutOpaque_t& a,
                            const cublasLtMatrixLayoutOpaque_t& b,
                            const cublasLtMatrixLayoutOpaque_t& c,
                            const cublasLtMatrixLayoutOpaque_t& d) {
  for (const auto* x : {&a, &b, &c, &d}) {
    if (x->ld < static_cast<int64_t>(x->rows) || x->ld < 1 || x->batch < 1) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  uint64_t am, ak, bk, bn;
  OpShape(a, desc.trans_a, &am, &ak);
  OpShape(b, desc.trans_b, &bk, &bn);
  if (ak != bk || am != d.rows || bn != d.cols || c.rows != d.rows || c.cols != d.cols ||
      a.batch != d.batch || b.batch != d.batch || c.batch != d.batch) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (desc.trans_a == CUBLAS_OP_C || desc.trans_b == CUBLAS_OP_C) {
    return CUBLAS_STATUS_NOT_SUPPORTED;  // real types: C is T, but not modelled
  }
  const bool f32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && c.type == CUDA_R_32F &&
                   d.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF && c.type == d.type &&
                    (d.type == CUDA_R_16BF || d.type == CUDA_R_32F);
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F || !(f32 || bf16)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Bytes from a matrix's first element to one past its last.
uint64_t SpanBytes(const cublasLtMatrixLayoutOpaque_t& x) {
  const uint64_t elements = (x.batch - 1) * static_cast<uint64_t>(x.stride) +
                            (x.cols - 1) * static_cast<uint64_t>(x.ld) + x.rows;
  return elements * ElementBytes(x.type);
}

std::string Describe(const char* name, const cublasLtMatrixLayoutOpaque_t& x) {
  char text[160];
  std::snprintf(text, sizeof text, "%s (%llu x %llu, ld %lld, %d items %lld apart)", name,
                static_cast<unsigned long long>(x.rows), static_cast<unsigned long long>(x.cols),
                static_cast<long long>(x.ld), x.batch, static_cast<long long>(x.stride));
  return text;
}

// a·b over k elements, summed in order in f32. Not instrumented: both rows
// are the emulator's own buffers (the operands' device ranges are checked
// before they are gathered).
[[gnu::no_sanitize_address]] float Dot(const float* a, const float* b, uint64_t k) {
  float sum = 0.0f;
  for (uint64_t p = 0; p < k; ++p) sum += a[p] * b[p];
  return sum;
}

uint32_t AlignmentOf(const void* p) {
  const auto bits = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && (bits & (alignment - 1)) != 0) alignment >>= 1;
  return alignment;
}

}  // namespace

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown cuBLAS status";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = new cublasLtMatmulDescOpaque_t{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* buf, size_t bytes) {
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return Set(&desc->trans_a, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return Set(&desc->trans_b, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      int32_t epilogue = 0;
      if (cublasStatus_t s = Set(&epilogue, buf, bytes); s != CUBLAS_STATUS_SUCCESS) return s;
      return epilogue == CUBLASLT_EPILOGUE_DEFAULT ? CUBLAS_STATUS_SUCCESS
                                                   : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not modelled
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute,
                                                const void* buf, size_t bytes) {
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return Set(&layout->batch, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return Set(&layout->stride, buf, bytes);
    case CUBLASLT_MATRIX_LAYOUT_LD: return Set(&layout->ld, buf, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not modelled
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buf, size_t bytes) {
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return Set(&preference->max_workspace, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return Set(&preference->alignment[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                 buf, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not modelled
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t* results,
    int* found) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1 || results == nullptr || found == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *found = 0;
  if (cublasStatus_t s = CheckProblem(*desc, *a, *b, *c, *d); s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = kAlgoTag;
  for (int i = 0; i < 4; ++i) results[0].algo.data[1 + i] = preference->alignment[i];
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void* alpha, const void* a, cublasLtMatrixLayout_t a_layout,
                              const void* b, cublasLtMatrixLayout_t b_layout, const void* beta,
                              const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (cublasStatus_t s = CheckProblem(*desc, *a_layout, *b_layout, *c_layout, *d_layout);
      s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  if (algo == nullptr || algo->data[0] != kAlgoTag || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const void* pointers[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) {
    if (AlignmentOf(pointers[i]) < algo->data[1 + i]) return CUBLAS_STATUS_INVALID_VALUE;
  }
  // Host pointer mode: the scalars are read now, the matrices when it runs.
  const float scale = *static_cast<const float*>(alpha);
  const float keep = *static_cast<const float*>(beta);
  const cublasLtMatmulDescOpaque_t op = *desc;
  const cublasLtMatrixLayoutOpaque_t la = *a_layout, lb = *b_layout, lc = *c_layout,
                                     ld = *d_layout;
  smallem::emu::Enqueue(stream, [=] {
    const std::pair<const char*, const cublasLtMatrixLayoutOpaque_t*> operands[4] = {
        {"A", &la}, {"B", &lb}, {"C", &lc}, {"D", &ld}};
    for (int i = 0; i < 4; ++i) {
      if (i == 2 && keep == 0.0f) continue;  // C is not read
      if (!smallem::emu::IsDeviceRange(pointers[i], SpanBytes(*operands[i].second))) {
        smallem::emu::Fault(cudaErrorIllegalAddress,
                            "cublasLtMatmul: " + Describe(operands[i].first, *operands[i].second) +
                                " reaches outside its device allocation");
        return;
      }
    }
    uint64_t m, k, unused, n;
    OpShape(la, op.trans_a, &m, &k);
    OpShape(lb, op.trans_b, &unused, &n);
    // op(A) gathered row by row and op(B) column by column, widened to f32,
    // so that each output's k-order sum reads two contiguous rows.
    std::vector<float> rows_a(m * k), cols_b(k * n), column(m);
    for (int32_t item = 0; item < ld.batch; ++item) {
      for (uint64_t i = 0; i < m; ++i) {
        for (uint64_t p = 0; p < k; ++p) {
          const int64_t ai = op.trans_a == CUBLAS_OP_N ? i + p * la.ld : p + i * la.ld;
          rows_a[i * k + p] = LoadElement(a, la.type, item * la.stride + ai);
        }
      }
      for (uint64_t j = 0; j < n; ++j) {
        for (uint64_t p = 0; p < k; ++p) {
          const int64_t bi = op.trans_b == CUBLAS_OP_N ? p + j * lb.ld : j + p * lb.ld;
          cols_b[j * k + p] = LoadElement(b, lb.type, item * lb.stride + bi);
        }
      }
      for (uint64_t j = 0; j < n; ++j) {
        const float* bj = &cols_b[j * k];
        for (uint64_t i = 0; i < m; ++i) {
          column[i] = scale * Dot(&rows_a[i * k], bj, k);
          if (keep != 0.0f) {
            column[i] += keep * LoadElement(c, lc.type, item * lc.stride + i + j * lc.ld);
          }
        }
        // Written after the column is read, so that C may be D.
        for (uint64_t i = 0; i < m; ++i) {
          const int64_t di = item * ld.stride + i + j * ld.ld;
          if (ld.type == CUDA_R_16BF) {
            static_cast<__nv_bfloat16*>(d)[di] = __float2bfloat16_rn(column[i]);
          } else {
            static_cast<float*>(d)[di] = column[i];
          }
        }
      }
    }
  });
  (void)workspace;
  (void)workspace_bytes;  // the emulated algorithm needs none
  return CUBLAS_STATUS_SUCCESS;
}
