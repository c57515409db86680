// Multi-head latent attention (DeepSeek-V2), `attention: latent`: every
// head's keys and values are rebuilt from one compressed latent per token,
// so a generation cache holds that latent and one small rotary key instead
// of H keys and H values.
//
// Per block, on the normed stream x (N, C), with H heads of D = C/H
// channels, L = kv_latent, R = rope_dim (ModelConfig::latent_rope_dim) and
// Dn = D − R:
//   c_kv   = RmsNorm(x · kv_downᵀ)                   (N, L)   the cached latent
//   kv     = c_kv · kv_upᵀ                           (N, H·Dn + H·D)
//            = [key content of each head | value of each head]
//   k_rope = Rope(x · key_ropeᵀ)                     (N, R)   cached, shared by all heads
//   q      = x · queryᵀ, or with Q = q_latent > 0
//            RmsNorm(x · query_downᵀ) · query_upᵀ    (N, H·D)
//            = [rotary part of each head (H·R) | content part of each head (H·Dn)],
//            the rotary part rotated by Rope in heads of R
//   qkv    = LatentQkv(q, kv, k_rope)                (N, 3C): head h's query
//            [q rotary_h | q content_h], key [k_rope | key content_h], value
//   out    = Attention(qkv) then the block's usual proj
//
// Head size: queries and keys keep D = Dn + R channels per head and values
// D, so the attention op, its kernels and its 1/√D scale are those of
// multi-head attention, and the attention FLOPs are equal; only the
// projections (and the cache) change. The latent norms are RMSNorm whatever
// the block's norm (as in DeepSeek-V2), gains only; the latent projections
// have no biases (the output projection keeps the block's). RoPE is
// required: its tables are R/2 wide, θ = m·10000^(−2i/R).
//
// Weights: runspec/parameter_layout.h names, shapes and orders them
// (LatentAttentionSlots); the block's attn.proj follows as in multi-head
// attention.
#ifndef SMALLEM_ENGINE_MODEL_LATENT_ATTENTION_H_
#define SMALLEM_ENGINE_MODEL_LATENT_ATTENTION_H_

#include <cstdint>
#include <functional>

#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/tensor.h"
#include "runspec/model_config.h"
#include "runspec/parameter_layout.h"

namespace smallem {

// Views of one block's latent attention weights; empty tensors for the query
// latent's when q_latent = 0 (then `query` projects from the stream).
struct LatentAttentionWeights {
  Tensor query;       // (H·D, C), or (H·D, Q) — query_up — with a query latent
  Tensor query_down;  // (Q, C)
  Tensor query_norm;  // (Q)
  Tensor kv_down;     // (L, C)
  Tensor kv_norm;     // (L)
  Tensor kv_up;       // (H·Dn + H·D, L)
  Tensor key_rope;    // (R, C)
};
// `view` returns the parameter of a slot index (an empty tensor for kNoSlot);
// all empty for a multi-head block.
LatentAttentionWeights LatentAttentionViews(const std::function<Tensor(int)>& view,
                                            const LatentAttentionSlots& slots);

// The attention output (N, C) before the output projection, from the normed
// stream x (N, C) of a (B, T) batch. `param` makes a weight a tape parameter
// (Model::Param); `rope` holds the (context, R/2) tables.
Var LatentAttentionForward(Tape& tape, const std::function<Var(const Tensor&)>& param,
                           const ModelConfig& config, const LatentAttentionWeights& w,
                           const RopeTables& rope, Var x, int64_t batch, int64_t time);

// Bytes per token of the generation cache (engine/model/latent_cache.h):
// each layer keeps the f32 latent (L) and the rotated key (R) of a position,
// 4·layers·(L + R); multi-head attention's keeps 4·layers·2C.
int64_t LatentCacheBytesPerToken(const ModelConfig& config);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_LATENT_ATTENTION_H_
