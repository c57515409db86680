// Batched GEMM with transposes, strides and broadcast. Each product runs
// single-threaded (oneDNN's sgemm, OpenBLAS's, or a plain loop); parallelism
// comes from splitting the batch, and each product into row or column slabs,
// across the OpenMP team, so one thread pool owns the cores.
//
// Where the build has both, oneDNN runs the products of at least
// kSmallProduct multiply-adds — the linear layers, where its JIT-compiled
// AVX-512 kernels are the faster — and OpenBLAS the smaller ones
// (attention's blocks), where its small-matrix kernels are. A transposed
// first operand of kTallTransposed rows or more — the head's gradient Gᵀ·X
// at vocabularies from 4096 — goes to OpenBLAS too where OpenBLAS runs its
// AVX-512 kernels, which beat oneDNN there (it packs that operand poorly);
// on its AVX2 kernels (a user's OPENBLAS_CORETYPE=Haswell on an AVX-512
// CPU) OpenBLAS is the slower one, so the rule asks BlasCoreIsAvx512. The
// measurements behind each choice: docs/benchmarks.md § The products'
// library and § On the Zen 5 machine (smallem_gemm_bench).
// oneDNN threads through the same OpenMP runtime as the ops.
#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/blas_core.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

#ifdef SMALLEM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef SMALLEM_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace smallem {
namespace cpu {

namespace {

// Parity sizes only (the GPU machine has neither oneDNN nor OpenBLAS): rows
// of c are built as sums of rows of op(b), so the inner loop is contiguous
// when b is not transposed; a transposed b is packed first. As in BLAS, the
// product is summed first and β·c added once: c + (x + y), never (c + x) + y,
// so a gradient accumulated over two products (a weight used twice) is the
// sum of the two products' own results bit for bit, as on the libraries.
void LoopGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b,
              int64_t ldb, float beta, float* c, int64_t ldc) {
  std::vector<float> packed, sum(static_cast<size_t>(n));
  if (trans_b) {
    packed.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) packed[p * n + j] = b[j * ldb + p];
    }
    b = packed.data();
    ldb = n;
  }
  for (int64_t i = 0; i < m; ++i) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float a_ip = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
      const float* b_row = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) sum[j] += a_ip * b_row[j];
    }
    float* c_row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) c_row[j] = beta == 0 ? sum[j] : sum[j] + beta * c_row[j];
  }
}

#ifdef SMALLEM_HAVE_DNNL
void OneDnnGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const float* a, int64_t lda, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  // oneDNN runs sequentially inside an active parallel region and otherwise
  // on omp_get_max_threads() threads: held to one here, so that a product's
  // result never depends on the thread count.
  const int caller_threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (caller_threads != 1) omp_set_num_threads(1);
  // oneDNN's no-copy sgemm kernels move the stack pointer onto a heap
  // workspace for any k over 84. A signal handler that ran on this thread
  // then would write its frame below that workspace, into the heap's own
  // bookkeeping: the SIGTERM that stops a training child corrupted its heap
  // that way. The thread takes no signal inside the call; one sent meanwhile
  // waits for the mask to lift, or goes to another thread.
  sigset_t all, caller_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &caller_mask);
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                 ldb, beta, c, ldc);
  pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  if (caller_threads != 1) omp_set_num_threads(caller_threads);
  CHECK_EQ(status, dnnl_success) << "dnnl_sgemm(" << m << ", " << n << ", " << k
                                 << ") failed with status " << status;
}
#endif

}  // namespace

absl::StatusOr<GemmChoice> ParseGemmChoice(std::string_view name) {
  if (name == "auto") return GemmChoice();
#ifdef SMALLEM_HAVE_DNNL
  if (name == "onednn") return GemmLibrary::kOneDnn;
#endif
#ifdef SMALLEM_HAVE_OPENBLAS
  if (name == "openblas") return GemmLibrary::kOpenBlas;
#endif
  if (name == "loop") return GemmLibrary::kLoop;
  constexpr const char* kBuilt =
      "auto, "
#ifdef SMALLEM_HAVE_DNNL
      "onednn, "
#endif
#ifdef SMALLEM_HAVE_OPENBLAS
      "openblas, "
#endif
      "loop";
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(name), "\" is not a GEMM library this build has: ", kBuilt));
}

GemmLibrary GemmLibraryFor(GemmChoice choice, bool trans_a, int64_t m, int64_t n, int64_t k) {
  if (choice.has_value()) return *choice;
#if defined(SMALLEM_HAVE_DNNL) && defined(SMALLEM_HAVE_OPENBLAS)
  const bool small = m * n * k < kSmallProduct;
  const bool tall_transposed = trans_a && m >= kTallTransposed && BlasCoreIsAvx512();
  return small || tall_transposed ? GemmLibrary::kOpenBlas : GemmLibrary::kOneDnn;
#elif defined(SMALLEM_HAVE_DNNL)
  return GemmLibrary::kOneDnn;
#elif defined(SMALLEM_HAVE_OPENBLAS)
  return GemmLibrary::kOpenBlas;
#else
  return GemmLibrary::kLoop;
#endif
}

const char* GemmLibraryName(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::kOneDnn: return "onednn";
    case GemmLibrary::kOpenBlas: return "openblas";
    case GemmLibrary::kLoop: return "loop";
  }
  return "?";
}

std::vector<GemmLibrary> GemmLibrariesInUse(GemmChoice choice) {
  const GemmLibrary large = GemmLibraryFor(choice, false, kSmallProduct, 1, 1);
  const GemmLibrary small = GemmLibraryFor(choice, false, 1, 1, 1);
  if (small == large) return {large};
  return {large, small};
}

std::string GemmLibraryName(GemmChoice choice) {
  std::string name;
  for (GemmLibrary library : GemmLibrariesInUse(choice)) {
    if (!name.empty()) name += '+';
    name += GemmLibraryName(library);
  }
  return name;
}

void GemmOn(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n,
            int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // c = beta·c: the loop does just that when k = 0, which oneDNN skips (it
  // leaves c as it was).
  if (k == 0) library = GemmLibrary::kLoop;
  switch (library) {
#ifdef SMALLEM_HAVE_DNNL
    case GemmLibrary::kOneDnn:
      return OneDnnGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
#ifdef SMALLEM_HAVE_OPENBLAS
    case GemmLibrary::kOpenBlas:
      return cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                         trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                         ldb, beta, c, ldc);
#endif
    default:
      return LoopGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void Gemm(GemmChoice choice, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc) {
  GemmOn(GemmLibraryFor(choice, trans_a, m, n, k), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
         beta, c, ldc);
}

}  // namespace cpu

void CpuBackend::Matmul(const MatmulParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::Matmul)) return;
  CheckMatmul(p);
  if (p.m == 0 || p.n == 0) return;

  // BLAS rejects a leading dimension of 0, even for empty products.
  const int64_t lda = std::max<int64_t>(1, p.trans_a ? p.m : p.k);
  const int64_t ldb = std::max<int64_t>(1, p.trans_b ? p.k : p.n);
  // Cut each product into `parts` slabs along its longer output side when
  // the batch alone cannot keep every thread busy.
  const double flops = 2.0 * p.m * p.n * p.k;
  int parts = 1;
  if (p.batch < threads_ && flops >= 1 << 18) {
    parts = static_cast<int>((threads_ + p.batch - 1) / p.batch);
  }
  const bool split_rows = p.m >= p.n;
  const int64_t tasks = p.batch * parts;
  const bool parallel = tasks > 1 && flops * p.batch >= 1 << 18;

  const float* a = p.a.f32();
  const float* b = p.b.f32();
  float* out = p.out.f32();
  // Chosen from the whole product, not a slab: the library, and so a row's
  // rounding, never depends on the thread count.
  const cpu::GemmLibrary library = cpu::GemmLibraryFor(gemm_, p.trans_a, p.m, p.n, p.k);
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t item = task / parts;
    const int part = static_cast<int>(task % parts);
    const float* a_i = a + item * p.stride_a;
    const float* b_i = b + item * p.stride_b;
    float* out_i = out + item * p.stride_out;
    const int64_t side = split_rows ? p.m : p.n;
    const int64_t begin = cpu::PartBegin(side, part, parts);
    const int64_t count = cpu::PartBegin(side, part + 1, parts) - begin;
    if (split_rows) {
      cpu::GemmOn(library, p.trans_a, p.trans_b, count, p.n, p.k, p.alpha,
                a_i + (p.trans_a ? begin : begin * lda), lda, b_i, ldb,
                p.beta, out_i + begin * p.n, p.n);
    } else {
      cpu::GemmOn(library, p.trans_a, p.trans_b, p.m, count, p.k, p.alpha, a_i, lda,
                b_i + (p.trans_b ? begin * ldb : begin), ldb, p.beta,
                out_i + begin, p.n);
    }
  }
}

}  // namespace smallem
