// Batched GEMM with transposes, strides and broadcast. Each product runs
// single-threaded (OpenBLAS or a plain loop); parallelism comes from
// splitting the batch, and each product into row or column slabs, across the
// OpenMP team, so one thread pool owns the cores.
#include <algorithm>
#include <vector>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

#ifdef SMALLEM_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace smallem {
namespace cpu {

#ifdef SMALLEM_HAVE_OPENBLAS

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

#else

// Parity sizes only (the GPU machine has no OpenBLAS): rows of c are built
// as sums of rows of op(b), so the inner loop is contiguous when b is not
// transposed; a transposed b is packed first.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  std::vector<float> packed;
  if (trans_b) {
    packed.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) packed[p * n + j] = b[j * ldb + p];
    }
    b = packed.data();
    ldb = n;
  }
  for (int64_t i = 0; i < m; ++i) {
    float* c_row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) c_row[j] = beta == 0 ? 0 : beta * c_row[j];
    for (int64_t p = 0; p < k; ++p) {
      const float a_ip = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
      const float* b_row = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
    }
  }
}

#endif

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
      cpu::Gemm(p.trans_a, p.trans_b, count, p.n, p.k, p.alpha,
                a_i + (p.trans_a ? begin : begin * lda), lda, b_i, ldb,
                p.beta, out_i + begin * p.n, p.n);
    } else {
      cpu::Gemm(p.trans_a, p.trans_b, p.m, count, p.k, p.alpha, a_i, lda,
                b_i + (p.trans_b ? begin * ldb : begin), ldb, p.beta,
                out_i + begin, p.n);
    }
  }
}

}  // namespace smallem
