// Work cut across the OpenMP team: the size below which an op stays on the
// calling thread, and [0, n) cut into contiguous parts or chunks.
#ifndef SMALLEM_ENGINE_CPU_PARTITION_H_
#define SMALLEM_ENGINE_CPU_PARTITION_H_

#include <cstdint>

namespace smallem::cpu {

// Below this many elements an op stays on the calling thread: waking the
// OpenMP team costs more than the work.
inline constexpr int64_t kParallelMin = 1 << 14;

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

#endif  // SMALLEM_ENGINE_CPU_PARTITION_H_
