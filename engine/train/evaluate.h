// Evaluate: the validation loss of a model on the fixed validation text
// (engine/train/validation_text.h, docs/validation.md), in nats per byte
// (Σ target-token losses / Σ UTF-8 bytes of the target tokens), nats per
// token and bits per byte.
#ifndef SMALLEM_ENGINE_TRAIN_EVALUATE_H_
#define SMALLEM_ENGINE_TRAIN_EVALUATE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/arena.h"
#include "engine/model/model.h"
#include "engine/train/validation_text.h"

namespace smallem {

struct EvalResult {
  double nats_per_byte = 0;
  double nats_per_token = 0;
  double bits_per_byte = 0;
  int64_t batches = 0;  // validation batches: ⌈spans / 16⌉
  int64_t spans = 0;    // spans scored
  int64_t tokens = 0;   // targets scored: spans · 64
  int64_t bytes = 0;    // their bytes
  // With multi-token prediction (engine/model/mtp.h), depth d's loss at
  // d − 1: nats per scored target whose window row t ≥ d (the rows where
  // depth d predicts). Empty without MTP. The fields above stay next-token.
  std::vector<double> mtp_nats_per_token;
};

// Scores every target of `text` with `model`, reading the windows
// ValidationWindows(text, model's context) in forward passes of up to
// `rows_per_pass` (> 0) windows of one length. The targets, and so the loss
// up to float rounding, do not depend on rows_per_pass; the losses are summed
// in double, in span order. token_bytes[id] is the byte length of token id
// (0 for specials). `arena` is reset before each pass and left reset.
EvalResult Evaluate(const Model& model, Arena& arena, std::span<const uint16_t> val,
                    const std::vector<int32_t>& token_bytes, const ValidationText& text,
                    int64_t rows_per_pass);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_EVALUATE_H_
