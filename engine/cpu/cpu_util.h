// Helpers shared by the CPU ops (engine/cpu/*.cc) and nothing else: a serial
// GEMM with leading dimensions, an array cut into chunks across the OpenMP
// team, an exp the compiler can vectorize (the fallback of vector_math.h) and
// per-thread scratch. Not part of the engine's interface (the ops' checks are
// engine/op_checks.h, shared with every backend).
#ifndef SMALLEM_ENGINE_CPU_CPU_UTIL_H_
#define SMALLEM_ENGINE_CPU_CPU_UTIL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smallem::cpu {

// Below this many elements an op stays on the calling thread: waking the
// OpenMP team costs more than the work.
inline constexpr int64_t kParallelMin = 1 << 14;

// c = alpha·op(a)·op(b) + beta·c on the calling thread, row-major with
// leading dimensions (BLAS conventions: beta = 0 never reads c). op(a) is
// (m, k), op(b) is (k, n). Runs single-threaded (the ops split work across
// threads themselves) on GemmLibraryFor(trans_a, m, n, k). Defined in matmul.cc.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc);

// The libraries a product can run on: oneDNN's sgemm, OpenBLAS's, a plain
// loop (the GPU machine's build, which has neither).
enum class GemmLibrary { kOneDnn, kOpenBlas, kLoop };
// Below this many multiply-adds (m·n·k) a product runs on OpenBLAS where the
// build has it, at or above it on oneDNN, except a transposed first operand
// of at least kTallTransposed rows, also OpenBLAS's where it runs AVX-512
// kernels (BlasCoreIsAvx512; matmul.cc says why).
inline constexpr int64_t kSmallProduct = int64_t{1} << 19;
inline constexpr int64_t kTallTransposed = 4096;
// The library for an (m, n, k) product, op(a) = aᵀ when trans_a: the default
// rule above, or the one the environment variable
// SMALLEM_GEMM=onednn|openblas|loop names (auto, the default, is the rule);
// a name the build lacks exits with a message.
GemmLibrary GemmLibraryFor(bool trans_a, int64_t m, int64_t n, int64_t k);
// Gemm on a given library: the Matmul op picks it from the whole product
// and runs it in slabs, so the thread count never changes a row's rounding.
void GemmOn(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n,
            int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc);
// "onednn", "openblas" or "loop".
const char* GemmLibraryName(GemmLibrary library);
// The libraries this process's products run on: the large products' first,
// then the small ones' where the rule splits them.
std::vector<GemmLibrary> GemmLibrariesInUse();
// Their names joined by "+": "onednn+openblas" (the default where both
// exist), "onednn", "openblas" or "loop".
std::string GemmLibraryName();

// Makes sure OpenBLAS runs the best kernels this CPU supports, once per
// process, before the first product, and returns the name of its kernel set
// ("Haswell", "SkylakeX", ...; "none" without OpenBLAS). Debian's OpenBLAS
// falls back to SSE3 kernels on CPU models newer than it knows; see
// blas_core.cc. Not thread-safe against concurrent products: CpuBackend's
// constructor calls it.
const std::string& EnsureBlasCore();
// Whether that kernel set is one of OpenBLAS's AVX-512 ones (SkylakeX,
// Cooperlake, SapphireRapids), decided once.
bool BlasCoreIsAvx512();

// The row ops on host memory, for CpuBackend: row_sum_squares.cc and
// row_scale.cc. in is
// (rows, cols); see RowReduceParams and RowScaleParams in engine/backend.h.
void RowSumSquares(const float* in, int64_t rows, int64_t cols, float alpha,
                   float beta, float* out, int threads);
void RowScale(const float* in, int64_t rows, int64_t cols, const float* numer,
              const float* denom, float alpha, float eps, float* out,
              int threads);

// At least `count` floats private to the calling thread, valid until its next
// call. Lets the ops keep scratch without allocating per call. Defined in
// cpu_backend.cc.
float* ThreadScratch(size_t count);

// e^x to about 2 ulp (Cephes' expf polynomial), written with plain float and
// integer arithmetic so that loops calling it vectorize: std::exp and even
// std::floor do not without -ffast-math. Underflows to 0 below −87.
inline float Exp(float x) {
  const float clamped = std::min(std::max(x, -87.0f), 88.0f);
  // Adding 1.5·2^23 rounds x·log2(e) to the nearest integer n, which then
  // sits in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kRound;
  const float n = shifted - kRound;
  const int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  // x − n·ln2 in two steps so the reduction stays exact.
  float r = clamped - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float result = p * std::bit_cast<float>((n_int + 127) << 23);
  return x < -87.0f ? 0.0f : result;
}

// √x for x ≥ 0, within an ulp: a bit-level first guess and three Newton
// steps. std::sqrt does not vectorize without -fno-math-errno (its errno
// branch is control flow the vectorizer rejects).
inline float Sqrt(float x) {
  float y = std::bit_cast<float>(0x1fbd1df5 + (std::bit_cast<int32_t>(x) >> 1));
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  y = 0.5f * (y + x / y);
  return x > 0.0f ? y : 0.0f;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

// First element of part `part` when [0, count) is cut into `parts` near-equal
// contiguous parts.
inline int64_t PartBegin(int64_t count, int part, int parts) {
  return count * part / parts;
}

// fn(begin, count) on contiguous chunks of [0, n), one per thread of a team
// of `threads` when n is worth waking it (kParallelMin), else one call on
// the calling thread. Chunks start at multiples of 16 floats (a cache line).
template <typename Fn>
void ForChunks(int threads, int64_t n, Fn fn) {
  const int parts = n >= kParallelMin && threads > 1 ? threads : 1;
  if (parts == 1) {
    fn(int64_t{0}, n);
    return;
  }
  const auto begin_of = [&](int part) {
    return part == parts ? n : PartBegin(n, part, parts) / 16 * 16;
  };
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int part = 0; part < parts; ++part) {
    const int64_t begin = begin_of(part);
    fn(begin, begin_of(part + 1) - begin);
  }
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_CPU_UTIL_H_
