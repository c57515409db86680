#include "engine/model/generation_speed.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/model/generator.h"

namespace smallem {

GenerationSpeed MeasureGreedyGeneration(const Model& model, int64_t tokens) {
  Generator generator(model);
  const std::vector<float>* logits = &generator.Feed(0);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < tokens; ++i) {
    const auto next = std::max_element(logits->begin(), logits->end()) - logits->begin();
    logits = &generator.Feed(static_cast<int32_t>(next));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return GenerationSpeed{.tokens = tokens, .seconds = seconds,
                         .cache_bytes_per_token = generator.CacheBytesPerToken()};
}

}  // namespace smallem
