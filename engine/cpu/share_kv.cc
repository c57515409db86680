// Keys and values borrowed from another layer: a packed qkv whose queries
// are the layer's own and whose keys and values are copied from the packed
// qkv of the layer that computed them. The backward routes each part of
// the gradient back to where it came from.
#include <cstring>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::ShareKvForward(const ShareKvParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::ShareKvForward)) return;
  CheckShareKv(p);
  const int64_t rows = p.q.shape.rows(), c = p.q.shape.cols();
  const float* q = p.q.f32();
  const float* source = p.source.f32();
  float* out = p.out.f32();
#pragma omp parallel for num_threads(threads_) if (rows * c >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * 3 * c, q + r * c, c * sizeof(float));
    std::memcpy(out + r * 3 * c + c, source + r * 3 * c + c, 2 * c * sizeof(float));
  }
}

void CpuBackend::ShareKvBackward(const ShareKvBackwardParams& p) {
  if (p.grad_q.empty() && p.grad_source.empty()) return;
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::ShareKvBackward)) return;
  CheckShareKvBackward(p);
  const int64_t rows = p.grad_out.shape.rows(), c = p.grad_out.shape.cols() / 3;
  const float* g = p.grad_out.f32();
  float* grad_q = p.grad_q.empty() ? nullptr : p.grad_q.f32();
  float* grad_source = p.grad_source.empty() ? nullptr : p.grad_source.f32();
#pragma omp parallel for num_threads(threads_) if (rows * c >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g_row = g + r * 3 * c;
    if (grad_q != nullptr) {
      float* q_row = grad_q + r * c;
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) q_row[i] += g_row[i];
    }
    if (grad_source != nullptr) {
      float* s_row = grad_source + r * 3 * c;
#pragma omp simd
      for (int64_t i = c; i < 3 * c; ++i) s_row[i] += g_row[i];
    }
  }
}

}  // namespace smallem
