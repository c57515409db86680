#include "engine/model/shared_keys.h"

namespace smallem {

Var BorrowedQkv(Tape& tape, Var normed, Var query_weight, Var query_bias, Var owner_qkv,
                const RopeTables* rope, int64_t time, int64_t head_dim) {
  Var q = Linear(tape, normed, query_weight, query_bias);
  if (rope != nullptr) {
    const int64_t channels = tape.value(q).shape.cols();
    q = Rope(tape, q, *rope, time, head_dim, channels);
  }
  return ShareKv(tape, q, owner_qkv);
}

}  // namespace smallem
