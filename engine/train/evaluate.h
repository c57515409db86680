// Evaluate: the validation loss of a model on the fixed validation batches,
// in nats per byte (Σ target-token losses / Σ UTF-8 bytes of the target
// tokens), nats per token and bits per byte.
#ifndef SMALLEM_ENGINE_TRAIN_EVALUATE_H_
#define SMALLEM_ENGINE_TRAIN_EVALUATE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/model/model.h"
#include "engine/train/batches.h"

namespace smallem {

struct EvalResult {
  double nats_per_byte = 0;
  double nats_per_token = 0;
  double bits_per_byte = 0;
  int64_t batches = 0;
  int64_t tokens = 0;  // targets scored
  int64_t bytes = 0;   // their bytes
};

// token_bytes[id] is the byte length of token id (0 for specials).
// `arena` is reset before each batch.
EvalResult Evaluate(const Model& model, Arena& arena, std::span<const uint16_t> val,
                    const std::vector<int32_t>& token_bytes, const ValidationPlan& plan);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_EVALUATE_H_
