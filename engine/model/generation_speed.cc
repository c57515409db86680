#include "engine/model/generation_speed.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "engine/model/generator.h"

namespace smallem {

GenerationSpeed MeasureGreedyGeneration(const Model& model, int64_t tokens, int64_t batch) {
  std::vector<std::unique_ptr<Generator>> generators;
  std::vector<const std::vector<float>*> logits;
  for (int64_t b = 0; b < batch; ++b) {
    generators.push_back(std::make_unique<Generator>(model));
    logits.push_back(&generators.back()->Feed(
        static_cast<int32_t>(b % model.config().vocab)));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<float>& l = *logits[b];
      const auto next = std::max_element(l.begin(), l.end()) - l.begin();
      logits[b] = &generators[b]->Feed(static_cast<int32_t>(next));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return GenerationSpeed{.tokens = tokens * batch, .seconds = seconds,
                         .cache_bytes_per_token = generators[0]->CacheBytesPerToken()};
}

}  // namespace smallem
