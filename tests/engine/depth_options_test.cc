// own_keys and passes (docs/model.md § Sharing keys and looping
// layers): the whole model's gradients against finite differences under
// each option and their combination, causality, save → load, the cache
// against the batch forward, 2 layers × 2 passes against 4 layers with
// copied weights, parameter and cache sizes, and the errors for impossible
// values.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/model/generation_speed.h"
#include "engine/model/generator.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"
#include "tests/engine/architectures.h"
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

struct DepthOption {
  const char* name;
  int64_t own_keys;
  int64_t passes;
};

// 3 layers: own_keys 1 leaves two borrowers, own_keys 2 one.
constexpr DepthOption kOptions[] = {
    {"own_keys1", 1, 1}, {"own_keys2", 2, 1}, {"passes2", 0, 2}, {"own_keys1_passes2", 1, 2}};

ModelConfig OptionConfig(const Architecture& arch, const DepthOption& o) {
  ModelConfig c = TinyConfig(arch);
  c.layers = 3;
  c.architecture.own_keys = o.own_keys;
  c.architecture.passes = o.passes;
  return c;
}

// The presets and two mixes: every piece of the architecture on each side,
// with and without RoPE (the borrowed keys arrive rotated).
std::vector<Architecture> SomeArchitectures() {
  return {Architecture::Gpt2(), Architecture::Modern(),
          Architecture{.norm = NormKind::kRms, .feed_forward = FeedForwardKind::kGelu,
                       .positions = PositionKind::kLearned, .bias = true},
          Architecture{.norm = NormKind::kLayer, .feed_forward = FeedForwardKind::kSwiGlu,
                       .positions = PositionKind::kRope, .bias = false}};
}

using Param = std::tuple<Architecture, DepthOption>;

class DepthOptionTest : public ::testing::TestWithParam<Param> {
 protected:
  ModelConfig Config() const {
    return OptionConfig(std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return ArchitectureName(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name;
}

// Logits at every position of `batch` sequences of equal length.
std::vector<float> AllLogits(const Model& model, const std::vector<int32_t>& ids,
                             int64_t batch = 1) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  return ToHost(be, tape.value(model.Logits(tape, Tokens(arena, be, ids), batch,
                                            static_cast<int64_t>(ids.size()) / batch)));
}

TEST_P(DepthOptionTest, GradientMatchesFiniteDifferences) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(Config(), be);
  ASSERT_TRUE(model.ok()) << model.status();
  // Smaller weights than model_test's: up to 6 blocks deep, a slope must
  // stay linear over the finite difference's step.
  Randomize(**model, 7, 0.2);
  const int64_t B = 2, T = 5;
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 5, 10, 7};
  const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 5, 10, 7, 6};
  const int checked =
      testing::ExpectGradientMatchesFiniteDifferences(**model, in, tg, B, T, 2e-3f);
  EXPECT_GT(checked, 20);
}

TEST_P(DepthOptionTest, FutureTokensDoNotChangePastOutputs) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(Config(), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 11);
  const std::vector<int32_t> a = {3, 1, 4, 1, 5, 9};
  const int64_t T = 6, V = 11;
  for (int64_t t = 0; t + 1 < T; ++t) {
    std::vector<int32_t> b = a;
    b[t + 1] = (b[t + 1] + 5) % 11;
    const std::vector<float> la = AllLogits(**model, a), lb = AllLogits(**model, b);
    for (int64_t i = 0; i < (t + 1) * V; ++i) {
      ASSERT_EQ(la[i], lb[i]) << "position " << i / V << " saw token " << t + 1;
    }
    bool later_changed = false;
    for (int64_t i = (t + 1) * V; i < T * V; ++i) later_changed |= la[i] != lb[i];
    EXPECT_TRUE(later_changed);
  }
}

TEST_P(DepthOptionTest, SaveThenLoadGivesTheSameLoss) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(Config(), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 12);
  const testing::TempDir dir;
  const std::string path = dir.Join("depth.safetensors");
  ASSERT_TRUE(SaveWeights(**model, path).ok());
  auto loaded = LoadWeights(path, be);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().architecture, Config().architecture);
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0}, tg = {4, 2, 9, 3, 8, 5};
  EXPECT_EQ(MeanLoss(**loaded, in, tg, 1, 6), MeanLoss(**model, in, tg, 1, 6));
}

TEST_P(DepthOptionTest, CachedLogitsEqualTheBatchForward) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(Config(), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 3);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9};
  const std::vector<float> batch = AllLogits(**model, ids);
  Generator gen(**model);
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::vector<float>& step = gen.Feed(ids[t]);
    for (int64_t v = 0; v < 11; ++v) {
      EXPECT_NEAR(step[v], batch[t * 11 + v], 1e-4) << "position " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOption, DepthOptionTest,
                         ::testing::Combine(::testing::ValuesIn(SomeArchitectures()),
                                            ::testing::ValuesIn(kOptions)),
                         ParamName);

// The parameters of `from` (own_keys off) copied into `to` so that block i of
// `to` is block i mod from.layers.
void CopyUnrolled(const Model& from, Model& to) {
  std::vector<float> src = ToHost(from.backend(), from.values());
  std::vector<float> dst(to.values().numel());
  for (const Model::Parameter& p : to.parameters()) {
    std::string name = p.name;
    if (name.starts_with("blocks.")) {
      const size_t dot = name.find('.', 7);
      const int64_t i = std::stoll(name.substr(7, dot - 7)) % from.config().layers;
      name = "blocks." + std::to_string(i) + name.substr(dot);
    }
    const Model::Parameter* q = from.Find(name);
    ASSERT_NE(q, nullptr) << name;
    std::copy_n(src.data() + (q->value.f32() - from.values().f32()), p.value.numel(),
                dst.data() + (p.value.f32() - to.values().f32()));
  }
  testing::FromHost(to.backend(), to.values(), dst);
}

class CopiedWeightsTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(CopiedWeightsTest, TwoLayersTwoPassesAreFourLayersWithCopiedWeights) {
  CpuBackend be(TestCpuOptions(2));
  ModelConfig looped = TinyConfig(GetParam());
  looped.architecture.passes = 2;
  ModelConfig unrolled = TinyConfig(GetParam());
  unrolled.layers = 4;
  auto a = Model::Create(looped, be);
  auto b = Model::Create(unrolled, be);
  ASSERT_TRUE(a.ok() && b.ok());
  Randomize(**a, 21);
  CopyUnrolled(**a, **b);

  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 5, 10, 7, 2, 3};
  const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 5, 10, 7, 6, 1, 0};
  EXPECT_EQ(AllLogits(**a, in, 2), AllLogits(**b, in, 2));
  auto grads = [&](Model& m) {
    Arena arena(be, 1 << 20);
    Tape tape(be, arena);
    m.ZeroGrad();
    tape.Backward(Mean(tape, m.Losses(tape, Tokens(arena, be, in), Tokens(arena, be, tg), 2, 6)));
    return ToHost(be, m.grads());
  };
  const std::vector<float> ga = grads(**a), gb = grads(**b);
  // A shared weight's gradient is the sum of its copies' (later pass first,
  // as the backward reaches it), bit for bit for the matrices and
  // embeddings. A gain's or a bias's backward adds its sum over rows into the
  // gradient in per-thread chunks, so the second copy's chunks land one by
  // one on the first's total rather than as one total: equal to the float
  // rounding of those few additions (absolute for the key biases, whose
  // gradient is zero up to rounding: softmax ignores a shift of the scores).
  for (const Model::Parameter& p : (*a)->parameters()) {
    const int64_t offset = p.value.f32() - (*a)->values().f32();
    auto at = [&](const std::string& name) {
      const Model::Parameter* q = (*b)->Find(name);
      return gb.data() + (q->value.f32() - (*b)->values().f32());
    };
    const float* first = at(p.name);
    const float* second = first;
    if (p.name.starts_with("blocks.")) {
      const size_t dot = p.name.find('.', 7);
      const int64_t i = std::stoll(p.name.substr(7, dot - 7));
      second = at("blocks." + std::to_string(i + 2) + p.name.substr(dot));
    }
    const bool gain = p.name.ends_with(".gain") || p.name.ends_with(".bias");
    for (int64_t k = 0; k < p.value.numel(); ++k) {
      const float expected = first == second ? first[k] : second[k] + first[k];
      if (gain) {
        ASSERT_NEAR(ga[offset + k], expected, 1e-7 + 1e-5 * std::abs(expected))
            << p.name << "[" << k << "]";
      } else {
        ASSERT_EQ(ga[offset + k], expected) << p.name << "[" << k << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOption, CopiedWeightsTest,
                         ::testing::ValuesIn(testing::AllArchitectures()), testing::ArchName);

TEST(DepthGeneratorTest, OwnKeysCacheSlidesPastTheContextExactly) {
  // Layer 0 owns the keys; layer 1 borrows them. The cached keys and values
  // then depend on their own token and position only, so with RoPE the slid
  // cache equals a fresh pass over the last window.
  CpuBackend be(TestCpuOptions(1));
  ModelConfig config = TinyConfig(Architecture::Modern());
  config.architecture.own_keys = 1;
  auto model = Model::Create(config, be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 4);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7};  // context 6
  Generator gen(**model);
  std::vector<float> last;
  for (int32_t id : ids) last = gen.Feed(id);
  EXPECT_EQ(gen.cached_positions(), 6);
  const std::vector<float> batch =
      AllLogits(**model, std::vector<int32_t>(ids.end() - 6, ids.end()));
  for (int64_t v = 0; v < 11; ++v) EXPECT_NEAR(last[v], batch[5 * 11 + v], 1e-4);
}

TEST(DepthGeneratorTest, PassesCacheEqualsTheCopiedLayersCachePastTheContext) {
  // With two passes the second pass's keys see earlier tokens, so a slid
  // cache is the usual sliding-window approximation: the same one as 4
  // layers with copied weights, stage for stage.
  for (const char* preset : {"gpt2", "modern"}) {
    CpuBackend be(TestCpuOptions(1));
    ModelConfig looped = TinyConfig(*Architecture::FromPreset(preset));
    looped.architecture.passes = 2;
    ModelConfig unrolled = looped;
    unrolled.architecture.passes = 1;
    unrolled.layers = 4;
    auto a = Model::Create(looped, be);
    auto b = Model::Create(unrolled, be);
    ASSERT_TRUE(a.ok() && b.ok());
    Randomize(**a, 5);
    CopyUnrolled(**a, **b);
    Generator ga(**a), gb(**b);
    EXPECT_EQ(ga.CacheBytesPerToken(), gb.CacheBytesPerToken());
    for (int32_t id : {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7}) {
      const std::vector<float> la = ga.Feed(id), lb = gb.Feed(id);
      for (int64_t v = 0; v < 11; ++v) ASSERT_NEAR(la[v], lb[v], 1e-5) << preset << " " << id;
    }
  }
}

TEST(DepthGeneratorTest, CacheBytesFollowTheLayout) {
  CpuBackend be(TestCpuOptions(1));
  ModelConfig c = TinyConfig(Architecture::Modern());  // 2 layers, C 8, f32
  c.layers = 4;
  auto bytes = [&](int64_t own_keys, int64_t passes) {
    c.architecture.own_keys = own_keys;
    c.architecture.passes = passes;
    auto model = Model::Create(c, be);
    CHECK(model.ok());
    return Generator(**model).CacheBytesPerToken();
  };
  EXPECT_EQ(bytes(0, 1), 4 * 2 * 8 * 4);  // layers × (k, v) × C × f32
  EXPECT_EQ(bytes(2, 1), 2 * 2 * 8 * 4);
  EXPECT_EQ(bytes(4, 1), bytes(0, 1));
  EXPECT_EQ(bytes(0, 2), 2 * bytes(0, 1));
  EXPECT_EQ(bytes(1, 2), 2 * 1 * 2 * 8 * 4);
}

TEST(DepthGeneratorTest, MeasuredGenerationReportsTheLayoutsBytes) {
  CpuBackend be(TestCpuOptions(1));
  ModelConfig c = TinyConfig(Architecture::Modern());
  c.architecture.own_keys = 1;
  c.architecture.passes = 3;
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok());
  (*model)->Initialize(1);
  const GenerationSpeed s = MeasureGreedyGeneration(**model, 20);  // slides past 6
  EXPECT_EQ(s.tokens, 20);
  EXPECT_GT(s.tokens_per_s(), 0);
  EXPECT_EQ(s.cache_bytes_per_token, Generator::LayoutFor(c).BytesPerToken());
  EXPECT_EQ(s.cache_bytes_per_token, 3 * 1 * 2 * 8 * 4);  // passes × owners × (k, v) × C × f32
  // Four sequences in lockstep count every sequence's tokens; each cache
  // has the same layout.
  const GenerationSpeed batched = MeasureGreedyGeneration(**model, 20, 4);
  EXPECT_EQ(batched.tokens, 80);
  EXPECT_GT(batched.tokens_per_s(), 0);
  EXPECT_EQ(batched.cache_bytes_per_token, s.cache_bytes_per_token);
}

TEST(DepthConfigTest, BorrowingLayersHaveNoKeyOrValueWeights) {
  CpuBackend be(TestCpuOptions(1));
  ModelConfig c = TinyConfig(Architecture::Gpt2());
  c.layers = 4;
  const int64_t full = c.ParameterCount();
  c.architecture.own_keys = 2;
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ParameterCount(), c.ParameterCount());
  EXPECT_EQ(full - c.ParameterCount(), 2 * (2 * 8 * 8 + 2 * 8));
  EXPECT_NE((*model)->Find("blocks.1.attn.key.weight"), nullptr);
  EXPECT_EQ((*model)->Find("blocks.2.attn.key.weight"), nullptr);
  EXPECT_EQ((*model)->Find("blocks.3.attn.value.bias"), nullptr);
  EXPECT_EQ((*model)->Find("blocks.3.attn.query.weight")->value.shape, (Shape{8, 8}));
  // Passes share weights: no new parameters.
  c.architecture.passes = 3;
  EXPECT_EQ(c.ParameterCount(), full - 2 * (2 * 8 * 8 + 2 * 8));
}

TEST(DepthConfigTest, ImpossibleValuesAreErrorsNamingTheKey) {
  ModelConfig c = TinyConfig(Architecture::Gpt2());
  c.architecture.own_keys = 3;  // 2 layers
  absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("own_keys 3"), std::string::npos) << s;
  c.architecture.own_keys = 0;
  c.architecture.passes = 0;
  s = c.Validate();
  EXPECT_NE(s.message().find("passes must be at least 1"), std::string::npos) << s;

  auto spec = RunSpec::FromJson(nlohmann::json{{"layers", 4}, {"own_keys", 5}});
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("\"own_keys\""), std::string::npos) << spec.status();
  spec = RunSpec::FromJson(nlohmann::json{{"passes", 0}});
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("\"passes\""), std::string::npos) << spec.status();
  spec = RunSpec::FromJson(nlohmann::json{{"passes", "two"}});
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("passes"), std::string::npos) << spec.status();
}

TEST(DepthConfigTest, JsonCarriesTheOptionsOnlyWhenSet) {
  ModelConfig c = TinyConfig(Architecture::Modern());
  EXPECT_FALSE(c.ToJson()["architecture"].contains("own_keys"));
  EXPECT_FALSE(c.ToJson()["architecture"].contains("passes"));
  c.architecture.own_keys = 1;
  c.architecture.passes = 3;
  auto back = ModelConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->architecture, c.architecture);
  RunSpec spec;
  EXPECT_FALSE(spec.ToJson().contains("own_keys"));
  spec.architecture.own_keys = 2;
  spec.architecture.passes = 2;
  auto spec_back = RunSpec::FromJson(spec.ToJson());
  ASSERT_TRUE(spec_back.ok()) << spec_back.status();
  EXPECT_EQ(spec_back->architecture, spec.architecture);
}

}  // namespace
}  // namespace smallem
