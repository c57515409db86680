#include "engine/model/latent_attention.h"

namespace smallem {

LatentAttentionWeights LatentAttentionViews(const std::function<Tensor(int)>& view,
                                            const LatentAttentionSlots& slots) {
  return LatentAttentionWeights{.query = view(slots.query),
                                .query_down = view(slots.query_down),
                                .query_norm = view(slots.query_norm),
                                .kv_down = view(slots.kv_down),
                                .kv_norm = view(slots.kv_norm),
                                .kv_up = view(slots.kv_up),
                                .key_rope = view(slots.key_rope)};
}

Var LatentAttentionForward(Tape& tape, const std::function<Var(const Tensor&)>& param,
                           const ModelConfig& config, const LatentAttentionWeights& w,
                           const RopeTables& rope, Var x, int64_t batch, int64_t time) {
  const int64_t H = config.heads, D = config.head_dim(), R = config.latent_rope_dim();
  Var q_in = x;
  if (!w.query_down.empty()) {
    q_in = RmsNorm(tape, Linear(tape, x, param(w.query_down)), param(w.query_norm));
  }
  // The first H·R channels of q are the heads' rotary parts: Rope rotates
  // them in heads of R and passes the content parts through.
  Var q = Rope(tape, Linear(tape, q_in, param(w.query)), rope, time, R, H * R);
  Var latent = RmsNorm(tape, Linear(tape, x, param(w.kv_down)), param(w.kv_norm));
  Var kv = Linear(tape, latent, param(w.kv_up));
  Var k_rope = Rope(tape, Linear(tape, x, param(w.key_rope)), rope, time, R, R);
  Var qkv = LatentQkv(tape, q, kv, k_rope, H, D, R);
  return Attention(tape, qkv, batch, time, H);
}

int64_t LatentCacheBytesPerToken(const ModelConfig& config) {
  return static_cast<int64_t>(sizeof(float)) * config.layers *
         (config.architecture.kv_latent + config.latent_rope_dim());
}

}  // namespace smallem
