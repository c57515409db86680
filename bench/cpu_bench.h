// What the CPU benchmarks share: operands made cold between rounds, the
// best of timed rounds, and random f32 tensors on a backend.
#ifndef SMALLEM_BENCH_CPU_BENCH_H_
#define SMALLEM_BENCH_CPU_BENCH_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace smallem::bench {

// The options of a benchmark's CpuBackend: SMALLEM_GEMM and
// SMALLEM_ATTENTION, read at the benchmark's start as every binary reads
// them (docs/benchmarks.md forces a library or kernel that way); a bad
// value ends the benchmark with the message.
inline CpuBackend::Options CpuOptions(int threads) {
  absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(threads);
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n", options.status().ToString().c_str());
    std::exit(2);
  }
  return *options;
}

// Writes a buffer larger than the caches (64 MiB): what the next call reads
// comes from memory, as a step's activations do.
inline void EvictCaches() {
  static std::vector<float> sweep(size_t{16} << 20);
  for (float& x : sweep) x += 1.0f;
}

// The best wall time of `rounds` calls of fn after one warm-up call
// (scratch, caches), the caches evicted before each when `cold`: a
// neighbour's load on a shared machine shows in the spread, not the best.
inline double BestSeconds(int rounds, bool cold, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    if (cold) EvictCaches();
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// A tensor of `shape` on `be`, each element scale·N(0, 1) from `rng`.
inline Tensor RandomTensor(Backend& be, Shape shape, Rng& rng, float scale) {
  Tensor t{.data = *be.Allocate(static_cast<size_t>(shape.numel()) * sizeof(float)),
           .shape = shape};
  std::vector<float> host(static_cast<size_t>(t.numel()));
  for (float& x : host) x = scale * static_cast<float>(rng.Normal());
  be.CopyToDevice(t.data, host.data(), t.bytes());
  return t;
}

}  // namespace smallem::bench

#endif  // SMALLEM_BENCH_CPU_BENCH_H_
