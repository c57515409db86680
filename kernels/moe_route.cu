// Mixture-of-experts routing on the device (engine/cpu/moe_route.cc is the
// reference): one thread per token picks its top-k (ties to the lower
// expert) and softmaxes the chosen logits; one block counts, prefix-sums
// and sorts the slots by expert, each expert's thread walking the slots in
// order (stable, no atomics: the same inputs give the same permutation).
// Everything stays on the device, so a step with routing can be captured.
#include "kernels/device_util.cuh"
#include "kernels/moe_kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RouteTopKKernel(const float* logits, const float* bias, int64_t n, int64_t e,
                                int64_t k, int32_t* experts, float* gates) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  const float* row = logits + t * e;
  int32_t* chosen = experts + t * k;
  float max_logit = -INFINITY;
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    float best_score = 0;
    for (int64_t i = 0; i < e; ++i) {
      bool taken = false;
      for (int64_t q = 0; q < j; ++q) taken |= chosen[q] == i;
      if (taken) continue;
      const float score = row[i] + (bias != nullptr ? bias[i] : 0.0f);
      if (best < 0 || score > best_score) {  // strict: ties keep the lower index
        best = static_cast<int32_t>(i);
        best_score = score;
      }
    }
    chosen[j] = best;
    max_logit = fmaxf(max_logit, row[best]);
  }
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += exp(double{row[chosen[j]]} - max_logit);
  for (int64_t j = 0; j < k; ++j) {
    gates[t * k + j] = static_cast<float>(exp(double{row[chosen[j]]} - max_logit) / sum);
  }
}

// One block: thread e counts expert e's slots, thread 0 prefix-sums, then
// each expert's thread writes its slots in ascending order.
__global__ void RouteSortKernel(const int32_t* experts, int64_t slots, int64_t e,
                                int32_t* order, int32_t* position, int32_t* offsets,
                                float* load) {
  SMALLEM_DYNAMIC_SHARED(int32_t, counts, alignof(int32_t));
  for (int64_t x = threadIdx.x; x < e; x += blockDim.x) {
    int32_t c = 0;
    for (int64_t s = 0; s < slots; ++s) c += experts[s] == x;
    counts[x] = c;
    if (load != nullptr) load[x] += static_cast<float>(c);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int64_t x = 0; x < e; ++x) offsets[x + 1] = offsets[x] + counts[x];
  }
  __syncthreads();
  for (int64_t x = threadIdx.x; x < e; x += blockDim.x) {
    int32_t at = offsets[x];
    for (int64_t s = 0; s < slots; ++s) {
      if (experts[s] != x) continue;
      order[at] = static_cast<int32_t>(s);
      position[s] = at;
      ++at;
    }
  }
}

__global__ void RouteBackwardKernel(const float* logits, const int32_t* experts,
                                    const float* gates, const int32_t* offsets,
                                    const float* grad_gates, float* grad_logits, int64_t n,
                                    int64_t e, int64_t k, float aux) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  double dot = 0;
  for (int64_t j = 0; j < k; ++j) dot += double{gates[t * k + j]} * grad_gates[t * k + j];
  for (int64_t j = 0; j < k; ++j) {
    const double g = gates[t * k + j];
    grad_logits[t * e + experts[t * k + j]] += static_cast<float>(g * (grad_gates[t * k + j] - dot));
  }
  if (aux <= 0) return;
  const float* row = logits + t * e;
  float max_logit = -INFINITY;
  for (int64_t i = 0; i < e; ++i) max_logit = fmaxf(max_logit, row[i]);
  double sum = 0, mean_f = 0;
  for (int64_t i = 0; i < e; ++i) sum += exp(double{row[i]} - max_logit);
  const double slots = double(n * k);
  for (int64_t i = 0; i < e; ++i) {
    mean_f += (offsets[i + 1] - offsets[i]) / slots * exp(double{row[i]} - max_logit) / sum;
  }
  const double scale = double{aux} * e / n;
  for (int64_t i = 0; i < e; ++i) {
    const double p = exp(double{row[i]} - max_logit) / sum;
    const double f = (offsets[i + 1] - offsets[i]) / slots;
    grad_logits[t * e + i] += static_cast<float>(scale * p * (f - mean_f));
  }
}

__global__ void BalanceKernel(float* bias, float* load, float* last_load, int64_t e, float rate) {
  double mean = 0;
  for (int64_t i = 0; i < e; ++i) mean += load[i];
  mean /= double(e);
  __syncthreads();  // every thread has read load before any zeroes it
  for (int64_t i = threadIdx.x; i < e; i += blockDim.x) {
    const double gap = mean - load[i];
    bias[i] += gap > 0 ? rate : gap < 0 ? -rate : 0.0f;
    last_load[i] = load[i];
    load[i] = 0;
  }
}

}  // namespace

cudaError_t LaunchMoeRouteForward(const float* logits, const float* bias, int64_t n, int64_t e,
                                  int64_t k, int32_t* experts, float* gates, int32_t* order,
                                  int32_t* position, int32_t* offsets, float* load,
                                  cudaStream_t stream) {
  if (n > 0) {
    SMALLEM_LAUNCH(RouteTopKKernel, (n + kThreads - 1) / kThreads, kThreads, 0, stream)(logits, bias, n, e,
                                                                            k, experts, gates);
  }
  SMALLEM_LAUNCH(RouteSortKernel, 1, kThreads, e * sizeof(int32_t), stream)(experts, n * k, e, order,
                                                                 position, offsets, load);
  return cudaGetLastError();
}

cudaError_t LaunchMoeRouteBackward(const float* logits, const int32_t* experts,
                                   const float* gates, const int32_t* offsets,
                                   const float* grad_gates, float* grad_logits, int64_t n,
                                   int64_t e, int64_t k, float aux_coefficient,
                                   cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(RouteBackwardKernel, (n + kThreads - 1) / kThreads, kThreads, 0, stream)(
      logits, experts, gates, offsets, grad_gates, grad_logits, n, e, k, aux_coefficient);
  return cudaGetLastError();
}

cudaError_t LaunchMoeBalance(float* bias, float* load, float* last_load, int64_t e, float rate,
                             cudaStream_t stream) {
  SMALLEM_LAUNCH(BalanceKernel, 1, kThreads, 0, stream)(bias, load, last_load, e, rate);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
