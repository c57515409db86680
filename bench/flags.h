// Command-line flags of the CPU benchmarks: `--name value` pairs anywhere in
// argv; a flag that is absent (or last, with no value) takes its fallback.
#ifndef SMALLEM_BENCH_FLAGS_H_
#define SMALLEM_BENCH_FLAGS_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace smallem::bench {

// The value after `name` as an integer (atoll: 0 when it is not a number).
inline int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return fallback;
}

inline std::string StringFlag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace smallem::bench

#endif  // SMALLEM_BENCH_FLAGS_H_
