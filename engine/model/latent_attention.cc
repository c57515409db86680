#include "engine/model/latent_attention.h"

#include "absl/strings/str_cat.h"

namespace smallem {

std::vector<LatentAttentionSlot> LatentAttentionSlots(const ModelConfig& config,
                                                      const std::string& prefix) {
  const int64_t C = config.embed, H = config.heads, D = config.head_dim();
  const int64_t R = config.latent_rope_dim(), L = config.architecture.kv_latent;
  const int64_t Q = config.architecture.q_latent;
  const std::string a = prefix + ".attn.";
  std::vector<LatentAttentionSlot> slots;
  if (Q > 0) {
    slots.push_back({a + "query_down.weight", {Q, C}, true});
    slots.push_back({a + "query_norm.gain", {Q}, false});
    slots.push_back({a + "query_up.weight", {H * D, Q}, true});
  } else {
    slots.push_back({a + "query.weight", {H * D, C}, true});
  }
  slots.push_back({a + "kv_down.weight", {L, C}, true});
  slots.push_back({a + "kv_norm.gain", {L}, false});
  slots.push_back({a + "kv_up.weight", {H * (2 * D - R), L}, true});
  slots.push_back({a + "key_rope.weight", {R, C}, true});
  return slots;
}

LatentAttentionWeights LatentAttentionViews(
    const std::function<Tensor(const std::string&)>& view, const std::string& prefix) {
  const std::string a = prefix + ".attn.";
  LatentAttentionWeights w{.query_down = view(a + "query_down.weight"),
                           .query_norm = view(a + "query_norm.gain"),
                           .kv_down = view(a + "kv_down.weight"),
                           .kv_norm = view(a + "kv_norm.gain"),
                           .kv_up = view(a + "kv_up.weight"),
                           .key_rope = view(a + "key_rope.weight")};
  w.query = w.query_down.empty() ? view(a + "query.weight") : view(a + "query_up.weight");
  return w;
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
