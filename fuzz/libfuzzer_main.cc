// The libFuzzer entry of one fuzz target, compiled once per target with
// SMALLEM_FUZZ_ENTRY naming its function (fuzz/CMakeLists.txt).
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return smallem::fuzz::SMALLEM_FUZZ_ENTRY(data, size);
}
