// The mixture-of-experts feed-forward of a block (runspec/moe_config.h,
// docs/model.md § Mixture of experts):
//
//   logits = x · W_rᵀ                      (N, E) f32
//   route: top-k by logits + bias, gates = softmax of the k chosen logits
//   xs = x rows sorted by expert           (N·k, C), once per layer
//   h  = act(grouped(xs, up[, gate]))      (N·k, W), one product per weight
//   ys = grouped(h, proj)                  (N·k, C)
//   out = Σ_j gate_j · ys[token's j-th row] (+ shared experts(x))
//
// Every token is processed by exactly its k experts (dropless): the
// products see each expert's contiguous rows, never all N rows. The
// selection bias is a non-trained buffer stored among the parameters
// ("blocks.i.ff.router.bias"; AdamW leaves it alone, its gradient being 0)
// and moved only by Balance(), after each optimizer step.
#ifndef SMALLEM_ENGINE_MODEL_MOE_H_
#define SMALLEM_ENGINE_MODEL_MOE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "engine/autograd/tape.h"
#include "nlohmann/json_fwd.hpp"
#include "runspec/model_config.h"

namespace smallem {

// One MoE layer's tensors: views into the model's parameters, and its
// routing counters (device memory the model owns).
struct MoeWeights {
  Tensor router;  // (E, C)
  Tensor bias;    // (E) selection bias (non-trained)
  Tensor up;      // (E, W, C)
  Tensor gate;    // (E, W, C), SwiGLU only
  Tensor proj;    // (E, C, W)
  Tensor shared_up, shared_gate, shared_proj;  // (S·W, C), (S·W, C), (C, S·W); empty if S = 0
  Tensor load;       // (E) f32 tokens per expert since the last Balance
  Tensor last_load;  // (E) f32 the counts Balance saw last
};

// The parameter of a tensor on the tape (Model::Param).
using MoeParamFn = absl::FunctionRef<Var(const Tensor&)>;

// The layer's output (N, C) for its normed input x (N, C). Counts tokens
// into w.load only while the tape records gradients (training steps, not
// evaluation).
Var MoeFeedForward(Tape& tape, MoeParamFn param, const ModelConfig& config,
                   const MoeWeights& w, Var x);

// After an optimizer step: the bias update (balance: bias) and the counts
// moved to last_load, all on the device (capturable in a step graph).
void MoeBalance(Backend& backend, const ModelConfig& config, const MoeWeights& w);

// One MoE layer's weights in a host copy of the parameters (Generator).
struct MoeHostWeights {
  const float* router = nullptr;  // (E, C); null: the layer is dense
  const float* bias = nullptr;    // (E)
  const float *up = nullptr, *gate = nullptr, *proj = nullptr;  // as in MoeWeights
  const float *shared_up = nullptr, *shared_gate = nullptr, *shared_proj = nullptr;
};
// The layer's output for one token on the host, in f32: the token routed
// exactly as in training (top-k by logit + bias, ties to the lower expert,
// softmax gates over the chosen logits), then its k experts run.
// h (C) is the normed input, out (C) is written.
void MoeFeedForwardHost(const ModelConfig& config, const MoeHostWeights& w, const float* h,
                        float* out);

// Routing statistics of the last balanced step, read from the device:
// tokens per expert summed over the MoE layers, and the worst layer's
// max/mean load (1 = perfectly even). Empty without MoE layers.
struct MoeStats {
  std::vector<double> tokens_per_expert;
  double max_over_mean = 0;
};
MoeStats ReadMoeStats(Backend& backend, const std::vector<MoeWeights>& layers);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_MOE_H_
