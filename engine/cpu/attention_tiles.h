// Causal attention in register tiles (engine/cpu/attention_tiles.cc), built
// where the engine has Highway (SMALLEM_HAVE_HWY). Layouts as
// AttentionParams: qkv (B, T, 3C), out (B, T, C), lse (B, H, T), C = H·D.
#ifndef SMALLEM_ENGINE_CPU_ATTENTION_TILES_H_
#define SMALLEM_ENGINE_CPU_ATTENTION_TILES_H_

#include <cstdint>

namespace smallem::cpu {

// Floats one (batch, head) pair's kept softmax takes in the kernels' own
// layout (query blocks of a vector's lanes, each over the keys it sees).
int64_t TiledAttentionPairProbs(int64_t time);

// out and lse; with probs (B·H·TiledAttentionPairProbs(T) floats, or null)
// the softmax is kept there for the backward.
void TiledAttentionForward(const float* qkv, float* out, float* lse, float* probs, int64_t batch,
                           int64_t time, int64_t heads, int64_t head_dim, int threads);

// grad_qkv written, never read. With the forward's probs, lse is not read;
// without, P is recomputed from lse. rowsum(dO ∘ O) is taken as
// rowsum(P ∘ dP), the same number, so the forward's out is not needed.
void TiledAttentionBackward(const float* qkv, const float* lse, const float* probs,
                            const float* grad_out, float* grad_qkv, int64_t batch, int64_t time,
                            int64_t heads, int64_t head_dim, int threads);

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_ATTENTION_TILES_H_
