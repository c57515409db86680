// Per-row sum of squares (optimizer statistics): out[r] = alpha·Σ in[r,:]² +
// beta·out[r]. Each row is summed in double by one thread, in order, so the
// result does not depend on the thread count or on how rows are batched.
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/row_ops.h"
#include "engine/op_checks.h"

namespace smallem {
namespace cpu {

void RowSumSquares(const float* in, int64_t rows, int64_t cols, float alpha,
                   float beta, float* out, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * cols >= kParallelMin && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    double sum = 0;
    for (int64_t k = 0; k < cols; ++k) {
      const double x = row[k];
      sum += x * x;
    }
    const double scaled = static_cast<double>(alpha) * sum;
    out[r] = beta == 0.0f ? static_cast<float>(scaled)
                          : static_cast<float>(scaled + static_cast<double>(beta) * out[r]);
  }
}

}  // namespace cpu

void CpuBackend::RowSumSquares(const RowReduceParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CheckRowSumSquares(p);
  cpu::RowSumSquares(p.in.f32(), rows, cols, p.alpha, p.beta, p.out.f32(), threads_);
}

}  // namespace smallem
