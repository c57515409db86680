#include "engine/model/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/autograd/moe_ops.h"
#include "engine/autograd/ops.h"
#include "engine/model/host_math.h"
#include "nlohmann/json.hpp"

namespace smallem {

Var MoeFeedForward(Tape& tape, MoeParamFn param, const ModelConfig& config,
                   const MoeWeights& w, Var x) {
  const MoeConfig& moe = config.moe;
  const bool swiglu = config.architecture.feed_forward == FeedForwardKind::kSwiGlu;
  const Var logits = Linear(tape, x, param(w.router), Var{}, Output::kF32);
  const float aux =
      moe.balance == BalanceKind::kAux ? static_cast<float>(moe.aux_coefficient) : 0.0f;
  const MoeRouting routing = MoeRoute(tape, logits, w.bias,
                                      tape.grad_enabled() ? w.load : Tensor{}, moe.top_k, aux);
  const Var rows = MoeDispatch(tape, x, routing);
  const Var up = GroupedMatmul(tape, rows, param(w.up), routing.offsets);
  const Var act = swiglu ? SwiGlu(tape, GroupedMatmul(tape, rows, param(w.gate), routing.offsets), up)
                         : Gelu(tape, up);
  Var out = MoeCombine(tape, GroupedMatmul(tape, act, param(w.proj), routing.offsets), routing);
  if (!w.shared_up.empty()) {
    const Var s_up = Linear(tape, x, param(w.shared_up));
    const Var s_act = swiglu ? SwiGlu(tape, Linear(tape, x, param(w.shared_gate)), s_up)
                             : Gelu(tape, s_up);
    out = Add(tape, out, Linear(tape, s_act, param(w.shared_proj)));
  }
  return out;
}

void MoeBalance(Backend& backend, const ModelConfig& config, const MoeWeights& w) {
  const float rate =
      config.moe.balance == BalanceKind::kBias ? static_cast<float>(config.moe.bias_rate) : 0.0f;
  backend.MoeBalance(
      MoeBalanceParams{.bias = w.bias, .load = w.load, .last_load = w.last_load, .rate = rate});
}

MoeStats ReadMoeStats(Backend& backend, const std::vector<MoeWeights>& layers) {
  MoeStats stats;
  for (const MoeWeights& w : layers) {
    std::vector<float> load(static_cast<size_t>(w.last_load.numel()));
    backend.CopyToHost(load.data(), w.last_load.data, w.last_load.bytes());
    stats.tokens_per_expert.resize(load.size(), 0.0);
    double sum = 0, max = 0;
    for (size_t e = 0; e < load.size(); ++e) {
      stats.tokens_per_expert[e] += load[e];
      sum += load[e];
      max = std::max<double>(max, load[e]);
    }
    if (sum > 0) {
      stats.max_over_mean =
          std::max(stats.max_over_mean, max / (sum / static_cast<double>(load.size())));
    }
  }
  return stats;
}

namespace {

// out += scale · proj · act(up · h [, gate · h]) for one expert of width W.
void ExpertHost(bool swiglu, const float* up, const float* gate, const float* proj,
                const float* h, int64_t c, int64_t width, float scale, float* out) {
  std::vector<float> a(static_cast<size_t>(width)), g(static_cast<size_t>(width));
  std::vector<float> y(static_cast<size_t>(c));
  host::MatVec(up, h, width, c, a.data());
  if (swiglu) {
    host::MatVec(gate, h, width, c, g.data());
    host::SwiGluInPlace(a.data(), g.data(), width);
  } else {
    for (float& v : a) v = host::GeluTanh(v);
  }
  host::MatVec(proj, a.data(), c, width, y.data());
  for (int64_t i = 0; i < c; ++i) out[i] += scale * y[i];
}

}  // namespace

void MoeFeedForwardHost(const ModelConfig& config, const MoeHostWeights& w, const float* h,
                        float* out) {
  const MoeConfig& moe = config.moe;
  const int64_t c = config.embed, e = moe.experts, k = moe.top_k;
  const int64_t width = moe.Width(config.ff_hidden());
  const bool swiglu = config.architecture.feed_forward == FeedForwardKind::kSwiGlu;
  std::vector<float> logits(static_cast<size_t>(e)), score(static_cast<size_t>(e));
  host::MatVec(w.router, h, e, c, logits.data());
  for (int64_t i = 0; i < e; ++i) score[i] = logits[i] + w.bias[i];
  std::vector<int32_t> index(static_cast<size_t>(e));
  std::iota(index.begin(), index.end(), 0);
  std::partial_sort(index.begin(), index.begin() + k, index.end(), [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  float max_logit = -INFINITY;
  for (int64_t j = 0; j < k; ++j) max_logit = std::max(max_logit, logits[index[j]]);
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += std::exp(double{logits[index[j]]} - max_logit);
  std::fill(out, out + c, 0.0f);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t x = index[j];
    const float gate = static_cast<float>(std::exp(double{logits[x]} - max_logit) / sum);
    ExpertHost(swiglu, w.up + x * width * c, swiglu ? w.gate + x * width * c : nullptr,
               w.proj + x * c * width, h, c, width, gate, out);
  }
  if (w.shared_up != nullptr) {
    ExpertHost(swiglu, w.shared_up, w.shared_gate, w.shared_proj, h, c, moe.shared * width, 1.0f,
               out);
  }
}

}  // namespace smallem
