// Generation with the cache (engine/model/generator.h) for each cache option
// against multi-head attention, in one run: greedy decoding, batch 1, of a
// `--tokens`-token text (one prompt token, then each token fed back) with a
// `--context` context (variants: multi-head attention, own_keys L/2 and
// L/4, passes 2, latent attention with a C/4 latent), so that with the default 700 past a 512 context the
// RoPE cache slides for the last 188 tokens. Prints one JSON line per
// variant: tokens/s, the cache's bytes per token from its layout, and both
// as ratios to multi-head attention measured in the same run. Weights are
// the training initialization (speed does not depend on their values).
// Each round runs every variant once, the first variant moving by one each
// round, and a variant's best round counts: a neighbour's load on a shared
// machine then falls on every variant alike rather than on the last ones.
//
//   smallem_generation_bench [--layers 8 --heads 8 --embed 512 --context 512
//                             --vocab 8192 --tokens 700 --rounds 3 --batch 1]
// With --batch B, B sequences step in lockstep, each with its own cache,
// and tokens/s counts all of them.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/generation_speed.h"
#include "engine/model/model.h"

namespace {

struct Variant {
  std::string name;
  int64_t own_keys;
  int64_t passes;
  int64_t kv_latent = 0;  // > 0: attention: latent with this latent width
};

}  // namespace

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  const int64_t layers = Flag(argc, argv, "--layers", 8);
  ModelConfig config{.vocab = Flag(argc, argv, "--vocab", 8192),
                     .context = Flag(argc, argv, "--context", 512),
                     .layers = layers,
                     .heads = Flag(argc, argv, "--heads", 8),
                     .embed = Flag(argc, argv, "--embed", 512),
                     .architecture = Architecture::Modern()};
  const int64_t tokens = Flag(argc, argv, "--tokens", 700);
  const int rounds = static_cast<int>(Flag(argc, argv, "--rounds", 3));
  // Sequences decoded in lockstep (engine/model/generation_speed.h).
  const int64_t batch = Flag(argc, argv, "--batch", 1);
  const std::vector<Variant> variants = {
      {"mha", 0, 1},
      {"own_keys" + std::to_string(layers / 2), layers / 2, 1},
      {"own_keys" + std::to_string(std::max<int64_t>(1, layers / 4)),
       std::max<int64_t>(1, layers / 4), 1},
      {"passes2", 0, 2},
      // Latent attention: a latent of C/4 and the default rotary width D/2,
      // the reference shape's 128 + 32 of 512 (the series' cache ÷ 6.4).
      {"latent", 0, 1, config.embed / 4}};
  CpuBackend backend(bench::CpuOptions(1));
  std::vector<std::unique_ptr<Model>> models;
  for (const Variant& v : variants) {
    ModelConfig c = config;
    c.architecture.own_keys = v.own_keys;
    c.architecture.passes = v.passes;
    if (v.kv_latent > 0) {
      c.architecture.attention = AttentionKind::kLatent;
      c.architecture.kv_latent = v.kv_latent;
    }
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(c, backend);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", v.name.c_str(), model.status().ToString().c_str());
      return 2;
    }
    (*model)->Initialize(1);
    models.push_back(*std::move(model));
  }
  const size_t n = variants.size();
  std::vector<GenerationSpeed> best(n);
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % n;
      // The prompt token, then tokens − 1 fed back: a text of `tokens`.
      const GenerationSpeed s = MeasureGreedyGeneration(*models[i], tokens - 1, batch);
      if (r == 0 || s.tokens_per_s() > best[i].tokens_per_s()) best[i] = s;
    }
  }
  const double mha_tokens_per_s = best[0].tokens_per_s();
  const double mha_bytes = static_cast<double>(best[0].cache_bytes_per_token);
  for (size_t i = 0; i < n; ++i) {
    const Variant& v = variants[i];
    const ModelConfig& c = models[i]->config();
    std::printf("{\"variant\":\"%s\",\"batch\":%lld,\"own_keys\":%lld,\"passes\":%lld,\"params\":%lld,"
                "\"tokens\":%lld,\"context\":%lld,\"tokens_per_s\":%.1f,"
                "\"cache_bytes_per_token\":%lld,\"speed_vs_mha\":%.3f,\"cache_vs_mha\":%.3f}\n",
                v.name.c_str(), static_cast<long long>(batch), static_cast<long long>(v.own_keys),
                static_cast<long long>(v.passes),
                static_cast<long long>(models[i]->ParameterCount()),
                static_cast<long long>(tokens), static_cast<long long>(c.context),
                best[i].tokens_per_s(), static_cast<long long>(best[i].cache_bytes_per_token),
                best[i].tokens_per_s() / mha_tokens_per_s,
                static_cast<double>(best[i].cache_bytes_per_token) / mha_bytes);
  }
  return 0;
}
