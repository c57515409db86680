// Which kernels OpenBLAS runs on this CPU (blas_core.cc): Debian's OpenBLAS
// falls back to SSE3 kernels on CPU models newer than it knows, so the
// engine asks for the best set the CPU supports before the first product.
#ifndef SMALLEM_ENGINE_CPU_BLAS_CORE_H_
#define SMALLEM_ENGINE_CPU_BLAS_CORE_H_

#include <string>

namespace smallem::cpu {

// Makes sure OpenBLAS runs the best kernels this CPU supports, once per
// process, before the first product, and returns the name of its kernel set
// ("Haswell", "SkylakeX", ...; "none" without OpenBLAS). Not thread-safe
// against concurrent products: CpuBackend's constructor calls it.
const std::string& EnsureBlasCore();
// Whether that kernel set is one of OpenBLAS's AVX-512 ones (SkylakeX,
// Cooperlake, SapphireRapids), decided once.
bool BlasCoreIsAvx512();

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_BLAS_CORE_H_
