// The CPU backend's matrix products on host memory: which library runs a
// product (oneDNN's sgemm, OpenBLAS's or a plain loop) and the serial GEMM
// on it. Defined in matmul.cc; the ops call them on their own slabs, so each
// product runs on the calling thread. Only GemmChoice, which a CpuBackend's
// options hold, is part of the engine's interface.
#ifndef SMALLEM_ENGINE_CPU_GEMM_H_
#define SMALLEM_ENGINE_CPU_GEMM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem::cpu {

// The libraries a product can run on: oneDNN's sgemm, OpenBLAS's, a plain
// loop (the GPU machine's build, which has neither).
enum class GemmLibrary { kOneDnn, kOpenBlas, kLoop };
// What picks a product's library: the rule below (nullopt, "auto") or one
// library for every product.
using GemmChoice = std::optional<GemmLibrary>;
// "auto", "onednn", "openblas" or "loop"; InvalidArgument naming the choices
// this build has for anything else (a library the build lacks included).
absl::StatusOr<GemmChoice> ParseGemmChoice(std::string_view name);

// c = alpha·op(a)·op(b) + beta·c on the calling thread, row-major with
// leading dimensions (BLAS conventions: beta = 0 never reads c). op(a) is
// (m, k), op(b) is (k, n). Runs single-threaded (the ops split work across
// threads themselves) on GemmLibraryFor(choice, trans_a, m, n, k).
void Gemm(GemmChoice choice, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc);
// Below this many multiply-adds (m·n·k) a product runs on OpenBLAS where the
// build has it, at or above it on oneDNN, except a transposed first operand
// of at least kTallTransposed rows, also OpenBLAS's where it runs AVX-512
// kernels (BlasCoreIsAvx512, blas_core.h; matmul.cc says why).
inline constexpr int64_t kSmallProduct = int64_t{1} << 19;
inline constexpr int64_t kTallTransposed = 4096;
// The library for an (m, n, k) product, op(a) = aᵀ when trans_a: the one
// `choice` names, or the rule above where it names none.
GemmLibrary GemmLibraryFor(GemmChoice choice, bool trans_a, int64_t m, int64_t n, int64_t k);
// Gemm on a given library: the Matmul op picks it from the whole product
// and runs it in slabs, so the thread count never changes a row's rounding.
void GemmOn(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n,
            int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc);
// "onednn", "openblas" or "loop".
const char* GemmLibraryName(GemmLibrary library);
// The libraries `choice` runs products on: the large products' first, then
// the small ones' where the rule splits them.
std::vector<GemmLibrary> GemmLibrariesInUse(GemmChoice choice);
// Their names joined by "+": "onednn+openblas" (the rule where both exist),
// "onednn", "openblas" or "loop".
std::string GemmLibraryName(GemmChoice choice);

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_GEMM_H_
