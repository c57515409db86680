// Where the tokens of each batch come from.
//
// TrainBatches: the training split cut into sequences of T + 1 tokens (stride
// T, so every token is a target once per epoch), visited in an order shuffled
// by the seed; when every sequence has been used the stream wraps into a new
// epoch with a new shuffle. The seed decides batch order only. The trainer
// takes only the starts (NextStarts) and gathers the tokens on the device
// (Backend::GatherSequences); Next builds the same batch on the host.
//
// The validation text is not cut from B and T: engine/train/validation_text.h.
#ifndef SMALLEM_ENGINE_TRAIN_BATCHES_H_
#define SMALLEM_ENGINE_TRAIN_BATCHES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/random.h"

namespace smallem {

class TrainBatches {
 public:
  // REQUIRES: tokens.size() > time (checked by the caller with a clear error).
  TrainBatches(std::span<const uint16_t> tokens, int64_t batch, int64_t time, uint64_t seed);

  // The next batch's B sequence starts (offsets into the split, each with
  // T + 1 tokens after it), in stream order.
  void NextStarts(int64_t* starts);
  // Fills inputs and targets, each (B·T) i32, from the next B starts:
  // row r is tokens[start_r, start_r + T) and tokens[start_r + 1, start_r + T].
  void Next(int32_t* inputs, int32_t* targets);
  // Sequences consumed / sequences per epoch.
  double epochs() const;

  // Where the stream is, for checkpoints: the generator, the current
  // epoch's order and the position in it. Restore takes a State taken from
  // a stream over the same split, B and T; InvalidArgument otherwise (an
  // order of another length, a cursor beyond it).
  struct State {
    Rng::State rng;
    std::vector<int64_t> order;  // sequence start offsets of the current epoch
    int64_t cursor = 0;          // next index into order
    int64_t consumed = 0;        // sequences consumed since the start
  };
  State Save() const;
  absl::Status Restore(State state);

 private:
  void Shuffle();

  std::span<const uint16_t> tokens_;
  int64_t batch_, time_;
  Rng rng_;
  std::vector<int64_t> order_;  // sequence start offsets
  int64_t cursor_ = 0;
  int64_t consumed_ = 0;
};

// The seed of a run's batch order: a stream other than the weights'.
inline uint64_t TrainBatchSeed(int64_t run_seed) {
  return static_cast<uint64_t>(run_seed) * 0x9e3779b9ULL + 1;
}

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_BATCHES_H_
