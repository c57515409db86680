// The CpuBackend options the engine tests run with. Like every binary, the
// test binary reads SMALLEM_GEMM and SMALLEM_ATTENTION at its edge, here, so
// that ctest can run the product and attention tests again with each library
// and kernel forced (tests/CMakeLists.txt); tests/engine/cpu_options_test.cc
// builds each choice in one process.
#ifndef SMALLEM_TESTS_ENGINE_TEST_CPU_BACKEND_H_
#define SMALLEM_TESTS_ENGINE_TEST_CPU_BACKEND_H_

#include "absl/status/statusor.h"
#include "base/check.h"
#include "engine/cpu/cpu_backend.h"

namespace smallem {

inline CpuBackend::Options TestCpuOptions(int threads = 0) {
  static const absl::StatusOr<CpuBackend::Options> environment =
      CpuBackend::OptionsFromEnvironment();
  CHECK(environment.ok()) << environment.status();
  CpuBackend::Options options = *environment;
  options.threads = threads;
  return options;
}

}  // namespace smallem

#endif  // SMALLEM_TESTS_ENGINE_TEST_CPU_BACKEND_H_
