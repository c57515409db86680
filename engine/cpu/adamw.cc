// One fused AdamW step (bias-corrected moments, decoupled weight decay),
// with the gradient optionally scaled for global-norm clipping first.
#include <algorithm>
#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/sqrt.h"
#include "engine/op_checks.h"

namespace smallem {

void CpuBackend::AdamW(const AdamWParams& p) {
  CheckAdamW(p);
  const int64_t n = p.param.numel();
  float clip = 1.0f;
  if (!p.grad_norm_sq.empty() && p.max_grad_norm > 0) {
    const double norm = std::sqrt(static_cast<double>(p.grad_norm_sq.f32()[0]));
    // A zero norm means a zero gradient: nothing to clip.
    if (norm > p.max_grad_norm) clip = static_cast<float>(p.max_grad_norm / norm);
  }
  const float beta1 = p.beta1, beta2 = p.beta2, eps = p.eps;
  // The step's scalars from device memory (here host memory) when given,
  // else from the parameters: the same f32 values either way.
  AdamWStepScalars scalars;
  if (!p.scalars.empty()) {
    const float* s = p.scalars.f32();
    scalars = AdamWStepScalars{.lr = s[0], .correction1 = s[1], .correction2 = s[2]};
  } else {
    scalars = MakeAdamWStepScalars(p.lr, beta1, beta2, p.step);
  }
  const float correction1 = scalars.correction1;
  const float correction2 = scalars.correction2;
  const float lr = scalars.lr;
  const float decay = lr * p.weight_decay;
  float* param = p.param.f32();
  const float* grad = p.grad.f32();
  float* m = p.m.f32();
  float* v = p.v.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * clip;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float m_hat = m[i] * correction1;
    const float v_hat = v[i] * correction2;
    param[i] -= lr * m_hat / (cpu::Sqrt(v_hat) + eps) + decay * param[i];
  }
}

}  // namespace smallem
