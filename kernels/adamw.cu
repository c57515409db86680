// One fused AdamW step (bias-corrected moments, decoupled weight decay),
// with the gradient optionally scaled for global-norm clipping first. The
// squared norm is read on the device, so clipping needs no host sync; so
// are the learning rate and bias corrections when the caller keeps them in
// device memory (a captured step replays with each step's values).
#include <cmath>

#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// param, grad, m, v: (count); grad_norm_sq: (1) or null; scalars: (3)
// [lr, correction1, correction2] or null (then hp's).
__global__ void AdamWKernel(float* param, const float* grad, float* m, float* v,
                            const float* grad_norm_sq, const float* scalars,
                            int64_t count, AdamWHyper hp) {
  if (scalars != nullptr) {
    hp.lr = scalars[0];
    hp.correction1 = scalars[1];
    hp.correction2 = scalars[2];
  }
  float clip = 1.0f;
  if (grad_norm_sq != nullptr && hp.max_grad_norm > 0.0f) {
    // In double, like the CPU reference; a zero norm means a zero gradient:
    // nothing to clip.
    const double norm = sqrt(static_cast<double>(*grad_norm_sq));
    if (norm > hp.max_grad_norm) clip = static_cast<float>(hp.max_grad_norm / norm);
  }
  const float decay = hp.lr * hp.weight_decay;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad[i] * clip;
    const float m_i = hp.beta1 * m[i] + (1.0f - hp.beta1) * g;
    const float v_i = hp.beta2 * v[i] + (1.0f - hp.beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i * hp.correction1;
    const float v_hat = v_i * hp.correction2;
    const float p = param[i];
    param[i] = p - (hp.lr * m_hat / (sqrtf(v_hat) + hp.eps) + decay * p);
  }
}

}  // namespace

cudaError_t LaunchAdamW(float* param, const float* grad, float* m, float* v,
                        const float* grad_norm_sq, const float* scalars,
                        int64_t count, const AdamWHyper& hyper,
                        cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(AdamWKernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(
      param, grad, m, v, grad_norm_sq, scalars, count, hyper);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
