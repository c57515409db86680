// Generation throughput: greedy decoding with the cache (engine/model/
// generator.h), timed on the wall clock. What a run's result
// reports as generation_tokens_per_s and what bench/generation_bench runs.
#ifndef SMALLEM_ENGINE_MODEL_GENERATION_SPEED_H_
#define SMALLEM_ENGINE_MODEL_GENERATION_SPEED_H_

#include <cstdint>

#include "engine/model/model.h"

namespace smallem {

struct GenerationSpeed {
  int64_t tokens = 0;            // tokens generated, all sequences (each one fed back)
  double seconds = 0;            // wall time of the generation, prompt excluded
  int64_t cache_bytes_per_token = 0;
  double tokens_per_s() const { return seconds > 0 ? tokens / seconds : 0; }
};

// Feeds a one-token prompt (id 0), then generates `tokens` greedily,
// sliding past the context when `tokens` exceeds it. With `batch` > 1,
// `batch` sequences (prompts 0 … batch − 1) step in lockstep, one token of
// each in turn, each with its own generator and cache: the host generator
// has no batched products, so this measures what `batch` live caches cost
// a decoder that reads every weight once per sequence.
GenerationSpeed MeasureGreedyGeneration(const Model& model, int64_t tokens, int64_t batch = 1);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_GENERATION_SPEED_H_
