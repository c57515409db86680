// attention: latent (engine/model/latent_attention.h): the config's
// constraints, the model's gradients against finite differences, causality,
// save → load, learning, and the generator's latent cache against the batch
// forward pass, past the context.
#include "engine/model/latent_attention.h"

#include <cmath>
#include <filesystem>
#include <string>

#include "engine/model/generator.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "engine/optim/adamw.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"
#include "tests/temp_dir.h"

namespace smallem {
namespace {

using testing::MeanLoss;
using testing::Randomize;
using testing::ToHost;
using testing::Tokens;

// Tiny: H 2, D 4 (R 2 rotary, 2 content), L 3; with q_latent, Q 5.
ModelConfig TinyLatent(int64_t q_latent, NormKind norm = NormKind::kRms) {
  Architecture a = Architecture::Modern();
  a.norm = norm;
  a.attention = AttentionKind::kLatent;
  a.kv_latent = 3;
  a.q_latent = q_latent;
  return ModelConfig{.vocab = 11, .context = 6, .layers = 2, .heads = 2, .embed = 8,
                     .architecture = a};
}

std::string Message(const ModelConfig& c) { return std::string(c.Validate().message()); }

TEST(LatentConfigTest, ImpossibleShapesNameTheKey) {
  ModelConfig c = TinyLatent(0);
  ASSERT_TRUE(c.Validate().ok()) << c.Validate();
  c.architecture.kv_latent = 0;
  EXPECT_NE(Message(c).find("kv_latent must be positive"), std::string::npos) << Message(c);
  c = TinyLatent(0);
  c.architecture.rope_dim = 3;
  EXPECT_NE(Message(c).find("rope_dim 3 must be even"), std::string::npos) << Message(c);
  c.architecture.rope_dim = 4;  // the whole head
  EXPECT_NE(Message(c).find("rope_dim 4 must be below the head size"), std::string::npos);
  c = TinyLatent(0);
  c.architecture.q_latent = -1;
  EXPECT_NE(Message(c).find("q_latent"), std::string::npos);
  c = TinyLatent(0);
  c.architecture.positions = PositionKind::kLearned;
  EXPECT_NE(Message(c).find("needs positions: rope"), std::string::npos) << Message(c);
  c = TinyLatent(0);
  c.architecture.attention = AttentionKind::kMha;
  EXPECT_NE(Message(c).find("kv_latent 3 applies only with attention: latent"), std::string::npos);
  EXPECT_NE(std::string(ParseAttention("mla").status().message()).find("expected mha or latent"),
            std::string::npos);
}

// Latent attention with shared keys or looped layers is not built: both
// are refused by name rather than trained into a model that cannot generate.
TEST(LatentConfigTest, OwnKeysAndPassesAreRefusedByName) {
  ModelConfig c = TinyLatent(0);
  c.architecture.own_keys = 1;
  EXPECT_NE(Message(c).find("own_keys cannot be combined with attention: latent"),
            std::string::npos)
      << Message(c);
  c = TinyLatent(0);
  c.architecture.passes = 2;
  EXPECT_NE(Message(c).find("passes cannot be combined with attention: latent"),
            std::string::npos)
      << Message(c);
}

TEST(LatentConfigTest, RunSpecCarriesTheKeysOnlyWhenLatent) {
  RunSpec mha;
  EXPECT_FALSE(mha.ToJson().contains("attention")) << "old specs keep their hashes";
  auto spec = RunSpec::FromJson(nlohmann::json{{"arch", "modern"}, {"attention", "latent"},
                                               {"kv_latent", 32}, {"q_latent", 48}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->architecture.kv_latent, 32);
  EXPECT_EQ(spec->ToJson()["attention"], "latent");
  auto again = RunSpec::FromJson(spec->ToJson());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ToJson(), spec->ToJson());
  auto bad = RunSpec::FromJson(
      nlohmann::json{{"arch", "modern"}, {"attention", "latent"}, {"kv_latent", 0}});
  EXPECT_NE(std::string(bad.status().message()).find("kv_latent must be positive"),
            std::string::npos);
  // The model config round-trips through its JSON (the weights file's).
  const ModelConfig c = TinyLatent(5);
  auto back = ModelConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->architecture, c.architecture);
  // A file without the fields is multi-head.
  nlohmann::json old = TinyLatent(0).ToJson();
  for (const char* k : {"attention", "kv_latent", "rope_dim", "q_latent"}) {
    old["architecture"].erase(k);
  }
  auto mha_back = ModelConfig::FromJson(old);
  ASSERT_TRUE(mha_back.ok());
  EXPECT_EQ(mha_back->architecture.attention, AttentionKind::kMha);
}

TEST(LatentConfigTest, LatentWithoutKvLatentGetsAQuarterOfTheEmbedding) {
  auto spec = RunSpec::FromJson(
      nlohmann::json{{"arch", "modern"}, {"attention", "latent"}, {"embed", 512}, {"heads", 8}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->architecture.kv_latent, 128);
  // The canonical spec names it: the same spec as one that gives it.
  EXPECT_EQ(spec->ToJson()["kv_latent"], 128);
  auto given = RunSpec::FromJson(nlohmann::json{{"arch", "modern"}, {"attention", "latent"},
                                                {"embed", 512}, {"heads", 8}, {"kv_latent", 128}});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->ToJson(), spec->ToJson());
  auto small = RunSpec::FromJson(nlohmann::json{{"arch", "modern"}, {"attention", "latent"}});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->architecture.kv_latent, 32);  // the default embed 128
  // Multi-head attention has none.
  auto mha = RunSpec::FromJson(nlohmann::json{{"arch", "modern"}});
  ASSERT_TRUE(mha.ok()) << mha.status();
  EXPECT_EQ(mha->architecture.kv_latent, 0);
}

TEST(LatentConfigTest, ParametersAndCacheOfTheReferenceShape) {
  // The series' shape: C 512, H 8 (D 64), L 128, R 32.
  ModelConfig c{.vocab = 8192, .context = 512, .layers = 8, .heads = 8, .embed = 512,
                .architecture = Architecture::Modern()};
  const int64_t mha_params = c.ParameterCount();
  c.architecture.attention = AttentionKind::kLatent;
  c.architecture.kv_latent = 128;
  EXPECT_EQ(c.latent_rope_dim(), 32);
  // Per block: query C² + kv_down 128·C + 128 + kv_up 8·(32 + 64)·128 + key_rope 32·C,
  // instead of query, key and value 3C².
  const int64_t block_delta = 512 * 512 + 128 * 512 + 128 + 8 * 96 * 128 + 32 * 512 -
                              3 * 512 * 512;
  EXPECT_EQ(c.ParameterCount(), mha_params + 8 * block_delta);
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ParameterCount(), c.ParameterCount());
  // 8 layers × (128 + 32) f32 = 5120 bytes per token; multi-head 8 × 2 × 512 × 4.
  EXPECT_EQ(LatentCacheBytesPerToken(c), 5120);
  EXPECT_DOUBLE_EQ(8.0 * 2 * 512 * 4 / LatentCacheBytesPerToken(c), 6.4);
}

class LatentModelTest : public ::testing::TestWithParam<int64_t> {};  // q_latent

TEST_P(LatentModelTest, GradientMatchesFiniteDifferences) {
  for (NormKind norm : {NormKind::kRms, NormKind::kLayer}) {
    CpuBackend be(TestCpuOptions(2));
    auto model = Model::Create(TinyLatent(GetParam(), norm), be);
    ASSERT_TRUE(model.ok()) << model.status();
    Randomize(**model, 7);
    const int64_t B = 2, T = 5;
    const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 5, 10, 7};
    const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 5, 10, 7, 6};
    const int checked =
        testing::ExpectGradientMatchesFiniteDifferences(**model, in, tg, B, T, 1e-2f);
    EXPECT_GT(checked, 20);
    EXPECT_NE((*model)->Find("blocks.1.attn.kv_up.weight"), nullptr);
    EXPECT_EQ((*model)->Find("blocks.1.attn.key.weight"), nullptr) << "no per-head keys";
  }
}

TEST_P(LatentModelTest, FutureTokensDoNotChangePastOutputs) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyLatent(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 11);
  const int64_t T = 6, V = 11;
  const std::vector<int32_t> a = {3, 1, 4, 1, 5, 9};
  auto logits = [&](const std::vector<int32_t>& ids) {
    Arena arena(be, 1 << 20);
    Tape tape(be, arena);
    tape.set_grad_enabled(false);
    return ToHost(be, tape.value((*model)->Logits(tape, Tokens(arena, be, ids), 1, T)));
  };
  const std::vector<float> la = logits(a);
  for (int64_t t = 0; t + 1 < T; ++t) {
    std::vector<int32_t> b = a;
    b[t + 1] = (b[t + 1] + 5) % 11;
    const std::vector<float> lb = logits(b);
    for (int64_t i = 0; i < (t + 1) * V; ++i) {
      ASSERT_EQ(la[i], lb[i]) << "position " << i / V << " saw token " << t + 1;
    }
    bool later_changed = false;
    for (int64_t i = (t + 1) * V; i < T * V; ++i) later_changed |= la[i] != lb[i];
    EXPECT_TRUE(later_changed);
  }
}

TEST_P(LatentModelTest, SavedAndLoadedModelHasTheSameLoss) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(TinyLatent(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 5);
  const testing::TempDir dir;
  const std::string path = dir.Join("latent.safetensors");
  ASSERT_TRUE(SaveWeights(**model, path).ok());
  auto loaded = LoadWeights(path, be);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().architecture, (*model)->config().architecture);
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0}, tg = {4, 2, 9, 3, 8, 5};
  EXPECT_EQ(MeanLoss(**loaded, in, tg, 1, 6), MeanLoss(**model, in, tg, 1, 6));
}

TEST_P(LatentModelTest, OverfitsOneBatch) {
  CpuBackend be(TestCpuOptions(2));
  ModelConfig c = TinyLatent(GetParam() > 0 ? 16 : 0);
  c.embed = 32;
  c.heads = 4;  // D 8: R 4, Dn 4
  c.architecture.kv_latent = 16;
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok());
  (*model)->Initialize(1);
  const auto [first, last] = testing::OverfitOneBatch(**model, 150);
  EXPECT_GT(first, 2.0f);
  EXPECT_LT(last, 0.05f) << "from " << first;
}

// Logits of the batch forward at every position of `ids`.
std::vector<float> BatchLogits(const Model& model, const std::vector<int32_t>& ids) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  return ToHost(be, tape.value(model.Logits(tape, Tokens(arena, be, ids), 1,
                                            static_cast<int64_t>(ids.size()))));
}

TEST_P(LatentModelTest, CachedLogitsEqualTheBatchForward) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(TinyLatent(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 3);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9};
  const std::vector<float> batch = BatchLogits(**model, ids);
  Generator gen(**model);
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::vector<float>& step = gen.Feed(ids[t]);
    for (int64_t v = 0; v < 11; ++v) {
      EXPECT_NEAR(step[v], batch[t * 11 + v], 1e-4) << "position " << t;
    }
  }
}

TEST_P(LatentModelTest, PastTheContextTheLatentCacheSlides) {
  // One layer, as in GeneratorTest: the slid cache must equal a fresh pass
  // over the last window, RoPE scores depending on distances only. 14 tokens
  // past a context of 6: the ring wraps twice.
  CpuBackend be(TestCpuOptions(1));
  ModelConfig config = TinyLatent(GetParam());
  config.layers = 1;
  auto model = Model::Create(config, be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 4);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7};
  Generator gen(**model);
  for (size_t n = 0; n < ids.size(); ++n) {
    const std::vector<float> last = gen.Feed(ids[n]);
    if (n + 1 < 6) continue;
    const std::vector<int32_t> window(ids.begin() + (n + 1 - 6), ids.begin() + n + 1);
    const std::vector<float> batch = BatchLogits(**model, window);
    for (int64_t v = 0; v < 11; ++v) {
      EXPECT_NEAR(last[v], batch[5 * 11 + v], 1e-4) << "after " << n + 1 << " tokens";
    }
  }
  EXPECT_EQ(gen.cached_positions(), 6);
}

INSTANTIATE_TEST_SUITE_P(QueryLatent, LatentModelTest, ::testing::Values(0, 5),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return info.param == 0 ? std::string("direct_query")
                                                  : std::string("query_latent");
                         });

}  // namespace
}  // namespace smallem
