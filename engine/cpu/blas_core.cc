// cpu::EnsureBlasCore (blas_core.h): Debian's OpenBLAS (0.3.21, built for
// every x86 core, DYNAMIC_ARCH) picks its kernels from the CPU's model
// number at load time, and on models newer than it knows — e.g. the Xeons of
// family 6 model 207 this project is measured on — it falls back to its
// Prescott (SSE3) kernels: sgemm at ~10 GFLOP/s instead of ~100. When the
// library chose such a pre-AVX2 core on a CPU with AVX2 and FMA, this asks
// it again for the best core the CPU supports (SkylakeX with AVX-512,
// Haswell with AVX2), through the same OPENBLAS_CORETYPE variable a user
// would set. A user's own OPENBLAS_CORETYPE always wins; a build without
// OpenBLAS, or with one that is not DYNAMIC_ARCH, is left alone.
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "engine/cpu/blas_core.h"

#ifdef SMALLEM_HAVE_OPENBLAS
#include <cblas.h>

// Exported by DYNAMIC_ARCH builds only, hence weak: null elsewhere.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}
#endif

namespace smallem::cpu {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether the lower-case core name starts with one of `cores`.
bool IsCoreAmong(const std::string& name, std::initializer_list<const char*> cores) {
  for (const char* core : cores) {
    if (name.rfind(core, 0) == 0) return true;
  }
  return false;
}

// OpenBLAS's x86 cores without AVX2 kernels, its fallbacks for unknown CPUs.
bool IsPreAvx2Core(const std::string& name) {
  return IsCoreAmong(name, {"prescott", "core2", "penryn", "dunnington", "nehalem",
                            "sandybridge", "atom", "nano", "katmai", "coppermine",
                            "northwood", "banias", "athlon", "opteron", "barcelona",
                            "bobcat", "unknown"});
}

// OpenBLAS's x86 cores with AVX-512 kernels.
bool IsAvx512Core(const std::string& name) {
  return IsCoreAmong(name, {"skylakex", "cooperlake", "sapphirerapids"});
}

std::string SelectBlasCore() {
#ifndef SMALLEM_HAVE_OPENBLAS
  return "none";
#else
  const std::string chosen = openblas_get_corename();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return chosen;
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return chosen;
  if (!IsPreAvx2Core(Lower(chosen))) return chosen;
  __builtin_cpu_init();
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd")) {
    better = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    better = "Haswell";
  }
  if (better == nullptr) return chosen;
  // Child processes (the worker's per-device children) inherit the choice.
  setenv("OPENBLAS_CORETYPE", better, /*overwrite=*/0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  return openblas_get_corename();
#endif
}

}  // namespace

const std::string& EnsureBlasCore() {
  static const std::string* const core = new std::string(SelectBlasCore());
  return *core;
}

bool BlasCoreIsAvx512() {
  static const bool avx512 = IsAvx512Core(Lower(EnsureBlasCore()));
  return avx512;
}

}  // namespace smallem::cpu
