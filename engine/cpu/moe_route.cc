// Mixture-of-experts routing (engine/backend.h, MoeRouteParams): top-k by
// logit + bias with ties to the lower expert, softmax gates over the chosen
// logits, a stable counting sort of the assignment slots by expert, and the
// bias balancing update. The backward holds the choice fixed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/op_checks.h"

namespace smallem {
namespace cpu {

// No [act] operands: routing runs in f32 and i32.
void ForEachActivation(MoeRouteParams&, ActivationVisitor) {}
void ForEachActivation(MoeRouteBackwardParams&, ActivationVisitor) {}
void ForEachActivation(MoeBalanceParams&, ActivationVisitor) {}

}  // namespace cpu

void CpuBackend::MoeRouteForward(const MoeRouteParams& p) {
  CheckMoeRoute(p);
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1], k = p.top_k;
  const float* logits = p.logits.f32();
  const float* bias = p.bias.empty() ? nullptr : p.bias.f32();
  int32_t* experts = p.experts.i32();
  float* gates = p.gates.f32();
  std::vector<int32_t> counts(static_cast<size_t>(e), 0);
  std::vector<int32_t> index(static_cast<size_t>(e));
  std::vector<float> score(static_cast<size_t>(e));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits + t * e;
    for (int64_t i = 0; i < e; ++i) score[i] = row[i] + (bias ? bias[i] : 0.0f);
    std::iota(index.begin(), index.end(), 0);
    // Higher score first; equal scores: lower index first (deterministic).
    std::partial_sort(index.begin(), index.begin() + k, index.end(), [&](int32_t a, int32_t b) {
      return score[a] > score[b] || (score[a] == score[b] && a < b);
    });
    float max_logit = -INFINITY;
    for (int64_t j = 0; j < k; ++j) max_logit = std::max(max_logit, row[index[j]]);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(double{row[index[j]]} - max_logit);
    for (int64_t j = 0; j < k; ++j) {
      experts[t * k + j] = index[j];
      gates[t * k + j] = static_cast<float>(std::exp(double{row[index[j]]} - max_logit) / sum);
      ++counts[index[j]];
    }
  }
  int32_t* offsets = p.offsets.i32();
  offsets[0] = 0;
  for (int64_t i = 0; i < e; ++i) offsets[i + 1] = offsets[i] + counts[i];
  // Stable counting sort: slots in ascending order within each expert.
  std::vector<int32_t> next(offsets, offsets + e);
  int32_t* order = p.order.i32();
  int32_t* position = p.position.i32();
  for (int64_t s = 0; s < n * k; ++s) {
    const int32_t at = next[experts[s]]++;
    order[at] = static_cast<int32_t>(s);
    position[s] = at;
  }
  if (!p.load.empty()) {
    float* load = p.load.f32();
    for (int64_t i = 0; i < e; ++i) load[i] += static_cast<float>(counts[i]);
  }
}

void CpuBackend::MoeRouteBackward(const MoeRouteBackwardParams& p) {
  CheckMoeRouteBackward(p);
  const int64_t n = p.logits.shape[0], e = p.logits.shape[1], k = p.experts.shape[1];
  const int32_t* experts = p.experts.i32();
  const float* gates = p.gates.f32();
  const float* grad_gates = p.grad_gates.f32();
  float* grad = p.grad_logits.f32();
  // Softmax over the chosen logits: dz_j = g_j (dg_j − Σ_i g_i dg_i).
  for (int64_t t = 0; t < n; ++t) {
    double dot = 0;
    for (int64_t j = 0; j < k; ++j) dot += double{gates[t * k + j]} * grad_gates[t * k + j];
    for (int64_t j = 0; j < k; ++j) {
      const double g = gates[t * k + j];
      grad[t * e + experts[t * k + j]] += static_cast<float>(g * (grad_gates[t * k + j] - dot));
    }
  }
  if (p.aux_coefficient <= 0) return;
  // L_aux = α·E·Σ_e f_e·P_e: dL/dz[t, j] = α·E/N · p_j (f_j − Σ_e f_e p_e).
  const int32_t* offsets = p.offsets.i32();
  std::vector<double> f(static_cast<size_t>(e)), prob(static_cast<size_t>(e));
  for (int64_t i = 0; i < e; ++i) f[i] = double(offsets[i + 1] - offsets[i]) / double(n * k);
  const double scale = double{p.aux_coefficient} * e / n;
  const float* logits = p.logits.f32();
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits + t * e;
    const double max_logit = *std::max_element(row, row + e);
    double sum = 0;
    for (int64_t i = 0; i < e; ++i) sum += prob[i] = std::exp(row[i] - max_logit);
    double mean_f = 0;
    for (int64_t i = 0; i < e; ++i) {
      prob[i] /= sum;
      mean_f += f[i] * prob[i];
    }
    for (int64_t i = 0; i < e; ++i) {
      grad[t * e + i] += static_cast<float>(scale * prob[i] * (f[i] - mean_f));
    }
  }
}

void CpuBackend::MoeBalance(const MoeBalanceParams& p) {
  CheckMoeBalance(p);
  const int64_t e = p.bias.numel();
  float* bias = p.bias.f32();
  float* load = p.load.f32();
  float* last = p.last_load.f32();
  double mean = 0;
  for (int64_t i = 0; i < e; ++i) mean += load[i];
  mean /= static_cast<double>(e);
  for (int64_t i = 0; i < e; ++i) {
    const double gap = mean - load[i];
    bias[i] += gap > 0 ? p.rate : gap < 0 ? -p.rate : 0.0f;
    last[i] = load[i];
    load[i] = 0;
  }
}

}  // namespace smallem
