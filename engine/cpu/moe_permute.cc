// Mixture-of-experts dispatch and combine (engine/backend.h): token rows to
// expert order and back, weighted by the gates. Each output row is written
// by one thread and sums in a fixed order, so results never depend on the
// thread count.
#include <cstring>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/op_checks.h"

namespace smallem {
namespace cpu {

void ForEachActivation(MoeDispatchParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(MoeDispatchBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_out, Access::kRead);
  visit(p.grad_x, Access::kUpdate);
}

void ForEachActivation(MoeCombineParams& p, ActivationVisitor visit) {
  visit(p.rows, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(MoeCombineBackwardParams& p, ActivationVisitor visit) {
  visit(p.rows, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_rows, p.overwrite_rows ? Access::kWrite : Access::kUpdate);
}

}  // namespace cpu

void CpuBackend::MoeDispatchForward(const MoeDispatchParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::MoeDispatchForward)) return;
  CheckMoeDispatch(p);
  const int64_t c = p.x.shape[1], rows = p.out.numel() / c, k = p.top_k;
  const float* x = p.x.f32();
  const int32_t* order = p.order.i32();
  float* out = p.out.f32();
#pragma omp parallel for num_threads(threads_) schedule(static) if (rows * c >= (1 << 15))
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(out + i * c, x + (order[i] / k) * c, static_cast<size_t>(c) * sizeof(float));
  }
}

void CpuBackend::MoeDispatchBackward(const MoeDispatchBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::MoeDispatchBackward)) return;
  CheckMoeDispatchBackward(p);
  const int64_t n = p.grad_x.shape[0], c = p.grad_x.shape[1], k = p.top_k;
  const float* g = p.grad_out.f32();
  const int32_t* position = p.position.i32();
  float* grad_x = p.grad_x.f32();
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * c >= (1 << 15))
  for (int64_t t = 0; t < n; ++t) {
    float* dst = grad_x + t * c;
    for (int64_t j = 0; j < k; ++j) {
      const float* src = g + int64_t{position[t * k + j]} * c;
      for (int64_t i = 0; i < c; ++i) dst[i] += src[i];
    }
  }
}

void CpuBackend::MoeCombineForward(const MoeCombineParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::MoeCombineForward)) return;
  CheckMoeCombine(p);
  const int64_t n = p.out.shape[0], c = p.out.shape[1], k = p.gates.shape[1];
  const float* rows = p.rows.f32();
  const float* gates = p.gates.f32();
  const int32_t* position = p.position.i32();
  float* out = p.out.f32();
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * c >= (1 << 15))
  for (int64_t t = 0; t < n; ++t) {
    float* dst = out + t * c;
    for (int64_t i = 0; i < c; ++i) dst[i] = 0;
    for (int64_t j = 0; j < k; ++j) {
      const float gate = gates[t * k + j];
      const float* src = rows + int64_t{position[t * k + j]} * c;
      for (int64_t i = 0; i < c; ++i) dst[i] += gate * src[i];
    }
  }
}

void CpuBackend::MoeCombineBackward(const MoeCombineBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::MoeCombineBackward)) return;
  CheckMoeCombineBackward(p);
  const int64_t n = p.grad_out.shape[0], c = p.grad_out.shape[1], k = p.gates.shape[1];
  const float* rows = p.rows.f32();
  const float* gates = p.gates.f32();
  const int32_t* position = p.position.i32();
  const float* g = p.grad_out.f32();
  float* grad_rows = p.grad_rows.empty() ? nullptr : p.grad_rows.f32();
  float* grad_gates = p.grad_gates.empty() ? nullptr : p.grad_gates.f32();
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * c >= (1 << 15))
  for (int64_t t = 0; t < n; ++t) {
    const float* go = g + t * c;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = position[t * k + j];
      if (grad_rows != nullptr) {
        const float gate = gates[t * k + j];
        float* dst = grad_rows + row * c;
        if (p.overwrite_rows) {
          for (int64_t i = 0; i < c; ++i) dst[i] = gate * go[i];
        } else {
          for (int64_t i = 0; i < c; ++i) dst[i] += gate * go[i];
        }
      }
      if (grad_gates != nullptr) {
        const float* src = rows + row * c;
        double dot = 0;
        for (int64_t i = 0; i < c; ++i) dot += double{src[i]} * go[i];
        grad_gates[t * k + j] += static_cast<float>(dot);
      }
    }
  }
}

}  // namespace smallem
