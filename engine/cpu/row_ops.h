// The optimizer's row ops on host memory, for CpuBackend's RowSumSquares and
// RowScale: row_sum_squares.cc and row_scale.cc. `in` is (rows, cols); see
// RowReduceParams and RowScaleParams in engine/backend.h for the meaning of
// the other arguments. `threads` is the OpenMP team's size.
#ifndef SMALLEM_ENGINE_CPU_ROW_OPS_H_
#define SMALLEM_ENGINE_CPU_ROW_OPS_H_

#include <cstdint>

namespace smallem::cpu {

void RowSumSquares(const float* in, int64_t rows, int64_t cols, float alpha,
                   float beta, float* out, int threads);
void RowScale(const float* in, int64_t rows, int64_t cols, const float* numer,
              const float* denom, float alpha, float eps, float* out,
              int threads);

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_ROW_OPS_H_
