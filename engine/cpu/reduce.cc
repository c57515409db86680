// Sum and sum of squares into a scalar, accumulated in double. The input is
// cut into fixed chunks whose partial sums are added in order, so the result
// is the same whatever the thread count.
#include <algorithm>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

constexpr int64_t kChunk = 1 << 14;

template <bool kSquares>
double ChunkedSum(const float* in, int64_t n, int threads) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for num_threads(threads) schedule(static) if (chunks > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = std::min(n, begin + kChunk);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = begin; i < end; ++i) {
      const double x = in[i];
      sum += kSquares ? x * x : x;
    }
    partial[chunk] = sum;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

void Store(const ReduceParams& p, double value) {
  float* out = p.out.f32();
  out[0] = p.accumulate ? static_cast<float>(out[0] + value)
                        : static_cast<float>(value);
}

}  // namespace

void CpuBackend::Sum(const ReduceParams& p) {
  CheckReduce(p, "sum");
  Store(p, ChunkedSum<false>(p.in.f32(), p.in.numel(), threads_));
}

void CpuBackend::SumSquares(const ReduceParams& p) {
  CheckReduce(p, "sum_squares");
  Store(p, ChunkedSum<true>(p.in.f32(), p.in.numel(), threads_));
}

}  // namespace smallem
