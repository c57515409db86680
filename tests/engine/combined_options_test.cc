// The architecture options together: keys shared across layers, the stack
// looped, a mixture of experts and multi-token prediction in one model. Each
// is tested alone beside its code; this checks they compose — the layout
// matches the config's count, the model is causal, the generation cache
// reproduces the batch forward, and a saved file reloads to the same loss.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/generator.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"
#include "tests/temp_dir.h"

namespace smallem {
namespace {

using testing::MeanLoss;
using testing::Randomize;
using testing::TinyConfig;
using testing::ToHost;
using testing::Tokens;

ModelConfig Everything() {
  ModelConfig c = TinyConfig(Architecture::Modern());
  c.layers = 3;
  c.architecture.own_keys = 1;  // layers 1 and 2 borrow layer 0's keys
  c.architecture.passes = 2;
  c.moe.experts = 4;
  c.moe.top_k = 2;
  c.mtp = 1;
  return c;
}

std::vector<float> AllLogits(const Model& model, const std::vector<int32_t>& ids) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  return ToHost(be, tape.value(model.Logits(tape, Tokens(arena, be, ids), 1,
                                            static_cast<int64_t>(ids.size()))));
}

// Layout, causality, cache against forward, save → load, for config `c`.
void ExpectComposes(const ModelConfig& c) {
  ASSERT_TRUE(c.Validate().ok()) << c.Validate();
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(c, be);  // dies if the layout disagrees with the count
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ParameterCount(), c.ParameterCount());
  EXPECT_GT(c.MtpParameterCount(), 0);
  EXPECT_LT(c.ActiveParameterCount(), c.TotalParameterCount());
  EXPECT_NE((*model)->Find("blocks.0.ff.router.weight"), nullptr);
  Randomize(**model, 5);

  // Causal: changing token t + 1 leaves the logits up to t alone.
  const std::vector<int32_t> a = {3, 1, 4, 1, 5, 9};
  const int64_t V = c.vocab;
  std::vector<int32_t> b = a;
  b[3] = (b[3] + 5) % V;
  const std::vector<float> la = AllLogits(**model, a), lb = AllLogits(**model, b);
  // Near, not equal: token 3's route changes how many rows each expert's
  // product has, and a GEMM may round a row differently in a product of a
  // different height (oneDNN's below 16 rows; smallem_gemm_bench prints
  // the heights). A leak of token 3 into the earlier positions would move
  // their logits by far more.
  for (int64_t i = 0; i < 3 * V; ++i) {
    ASSERT_NEAR(la[i], lb[i], 1e-5f * std::max(1.0f, std::abs(la[i]))) << "position " << i / V;
  }

  // The generation cache (one stage per owning layer per pass, routed
  // experts on the host) gives the batch forward's logits.
  Generator gen(**model);
  for (size_t t = 0; t < a.size(); ++t) {
    const std::vector<float>& step = gen.Feed(a[t]);
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_NEAR(step[v], la[t * V + v], 1e-4) << "position " << t;
    }
  }
  EXPECT_EQ(gen.CacheBytesPerToken(), Generator::LayoutFor(c).BytesPerToken());

  // Saved and loaded: the same config and the same loss.
  const testing::TempDir dir;
  const std::string path = dir.Join("combined.safetensors");
  ASSERT_TRUE(SaveWeights(**model, path).ok());
  auto loaded = LoadWeights(path, be);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().ToJson(), c.ToJson());
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0}, tg = {4, 2, 9, 3, 8, 5};
  EXPECT_EQ(MeanLoss(**loaded, in, tg, 1, 6), MeanLoss(**model, in, tg, 1, 6));
}

TEST(CombinedOptionsTest, SharedKeysPassesExpertsAndMtpCompose) {
  ExpectComposes(Everything());
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(Everything(), be);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->Find("blocks.1.attn.key.weight"), nullptr);  // a borrower
}

TEST(CombinedOptionsTest, LatentAttentionExpertsAndMtpCompose) {
  ModelConfig c = TinyConfig(Architecture::Modern());
  c.layers = 2;
  c.architecture.attention = AttentionKind::kLatent;
  c.architecture.kv_latent = 3;
  c.moe.experts = 4;
  c.mtp = 1;
  ExpectComposes(c);
}

}  // namespace
}  // namespace smallem
