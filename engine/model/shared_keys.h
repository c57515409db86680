// Keys and values shared across layers (the architecture's own_keys): a
// borrowing layer projects its queries alone and attends over the keys and
// values the last owning layer of the same pass computed. Its packed qkv is
// [own q | borrowed k, v], so the attention op and its kernels are those of
// every layer (docs/model.md § Sharing keys and looping layers).
#ifndef SMALLEM_ENGINE_MODEL_SHARED_KEYS_H_
#define SMALLEM_ENGINE_MODEL_SHARED_KEYS_H_

#include <cstdint>

#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"

namespace smallem {

// normed (B·T, C) → the packed qkv (B·T, 3C) of a borrowing layer: queries
// normed · query_weightᵀ (+ query_bias), rotated when `rope` is given (the
// owner's keys already are), keys and values those of owner_qkv, the owning
// layer's packed (and rotated) qkv.
Var BorrowedQkv(Tape& tape, Var normed, Var query_weight, Var query_bias, Var owner_qkv,
                const RopeTables* rope, int64_t time, int64_t head_dim);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_SHARED_KEYS_H_
