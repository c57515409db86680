// Multi-token prediction (DeepSeek-V3 style): D extra depths trained beside
// the next-token model, depth d (1..D) predicting token t+1+d. Depth d takes
// the previous depth's stream h (depth 0: the main model's residual stream
// after its last block, before the final norm) and the embedding of token
// t+d (the shared table), and computes
//
//   x = hidden_norm(h_t) · W_hiddenᵀ + embed_norm(embed[token t+d]) · W_embedᵀ
//       (the projection of the concatenation [norm(h); norm(e)], 2C → C,
//        as two C×C products summed; no bias)
//   h' = block(x)          one block of the model's own type, its own weights
//   logits = final_norm_d(h') · embedᵀ     its own final norm, the shared head
//
// The rows are laid out by the target they predict: row t of depth d holds
// the prediction of targets[t] = token t+1, made from the main stream at
// t − d and the tokens t − d + 1 … t. Each depth then reads the previous
// depth's stream shifted down one row within its sequence (an embedding
// gather over the stream with constant ids) and the token embeddings of the
// batch's own inputs, and is scored against the batch's own targets: no
// data beyond the usual T + 1 tokens per sequence is needed. Rows t < d of
// each sequence have no main stream at t − d: they are computed (from
// tokens at or before t only, so causality holds) and attended to by the
// later rows, but never scored; depth d is scored on the T − d rows t ≥ d.
//
// Training minimizes mean next-token loss + mtp_weight × (1/D) Σ_d (mean
// of depth d over its scored rows). The next-token loss alone is what
// training reports, what evaluation scores and what generation uses; the
// depths' validation losses are reported beside it.
//
// Parameters of depth d (1-based), after the main model's: a block named
// like the main ones, the two input norms, the two merge matrices and the
// final norm (runspec/parameter_layout.h names and orders them).
#ifndef SMALLEM_ENGINE_MODEL_MTP_H_
#define SMALLEM_ENGINE_MODEL_MTP_H_

#include "runspec/parameter_layout.h"  // MtpPrefix, BlockPrefixes

#endif  // SMALLEM_ENGINE_MODEL_MTP_H_
