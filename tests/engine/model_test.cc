// The model as a whole: parameter counts of the reference config, gradients
// of every architecture option against finite differences, causality, RoPE's
// properties, and that it can learn (overfit one batch).
#include "engine/model/model.h"

#include <cmath>

#include "engine/optim/adamw.h"
#include "gtest/gtest.h"
#include "tests/engine/architectures.h"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

using testing::MeanLoss;
using testing::Randomize;
using testing::TinyConfig;
using testing::ToHost;
using testing::Tokens;

ModelConfig Reference(Architecture arch) {
  return ModelConfig{.vocab = 8192, .context = 512, .layers = 8, .heads = 8, .embed = 512,
                     .architecture = arch};
}

TEST(ModelConfigTest, ReferenceGpt2HasAbout29Point7MillionParameters) {
  const ModelConfig c = Reference(Architecture::Gpt2());
  EXPECT_EQ(c.ParameterCount(), 29'676'544);
  EXPECT_NEAR(c.ParameterCount() / 1e6, 29.7, 0.05);
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ParameterCount(), c.ParameterCount());
  EXPECT_EQ((*model)->Find("positions.weight")->value.numel(), 262'144);
}

TEST(ModelConfigTest, SwiGluHiddenIs8COver3RoundedUpTo8) {
  ModelConfig c = Reference(Architecture::Modern());
  EXPECT_EQ(c.ff_hidden(), 1368);
  c.architecture.feed_forward = FeedForwardKind::kGelu;
  EXPECT_EQ(c.ff_hidden(), 2048);
}

TEST(ModelConfigTest, InvalidConfigsNameTheProblem) {
  ModelConfig c = Reference(Architecture::Gpt2());
  c.heads = 7;
  absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not divisible by heads"), std::string::npos) << s;
  EXPECT_FALSE(Architecture::FromPreset("gpt3").ok());
  EXPECT_NE(std::string(ParseNorm("rsm").status().message()).find("expected layer or rms"),
            std::string::npos);
}

class ModelArchTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(ModelArchTest, GradientMatchesFiniteDifferences) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyConfig(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 7);
  const int64_t B = 2, T = 5;
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 5, 10, 7};
  const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 5, 10, 7, 6};

  // Every parameter tensor, a few entries each, by central differences.
  const int checked =
      testing::ExpectGradientMatchesFiniteDifferences(**model, in, tg, B, T, /*eps=*/1e-2f);
  EXPECT_GT(checked, 20);
}

TEST_P(ModelArchTest, FutureTokensDoNotChangePastOutputs) {
  CpuBackend be(TestCpuOptions(2));
  auto model = Model::Create(TinyConfig(GetParam()), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 11);
  const int64_t T = 6;
  std::vector<int32_t> a = {3, 1, 4, 1, 5, 9};
  for (int64_t t = 0; t + 1 < T; ++t) {
    std::vector<int32_t> b = a;
    b[t + 1] = (b[t + 1] + 5) % 11;
    auto logits = [&](const std::vector<int32_t>& ids) {
      Arena arena(be, 1 << 20);
      Tape tape(be, arena);
      tape.set_grad_enabled(false);
      return ToHost(be, tape.value((*model)->Logits(tape, Tokens(arena, be, ids), 1, T)));
    };
    const std::vector<float> la = logits(a), lb = logits(b);
    const int64_t V = 11;
    for (int64_t i = 0; i < (t + 1) * V; ++i) {
      ASSERT_EQ(la[i], lb[i]) << "position " << i / V << " saw token " << t + 1;
    }
    bool later_changed = false;
    for (int64_t i = (t + 1) * V; i < T * V; ++i) later_changed |= la[i] != lb[i];
    EXPECT_TRUE(later_changed);
  }
}

TEST_P(ModelArchTest, OverfitsOneBatch) {
  CpuBackend be(TestCpuOptions(2));
  ModelConfig c = TinyConfig(GetParam());
  c.embed = 32;
  c.heads = 4;
  auto model = Model::Create(c, be);
  ASSERT_TRUE(model.ok());
  (*model)->Initialize(1);
  const auto [first, last] = testing::OverfitOneBatch(**model, 150);
  EXPECT_GT(first, 2.0f);
  EXPECT_LT(last, 0.05f) << "from " << first;
}

INSTANTIATE_TEST_SUITE_P(EveryOption, ModelArchTest,
                         ::testing::ValuesIn(testing::AllArchitectures()), testing::ArchName);

std::vector<float> LastLogits(const Model& model, const std::vector<int32_t>& ids) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<float> all = ToHost(be, tape.value(model.Logits(tape, Tokens(arena, be, ids), 1, T)));
  const int64_t V = model.config().vocab;
  return std::vector<float>(all.end() - V, all.end());
}

TEST(RopeTest, SwappingTwoPastTokensChangesTheLastLogits) {
  // Without positions attention is a set operation: a swap of past tokens
  // leaves the last position unchanged. RoPE must break that symmetry.
  CpuBackend be(TestCpuOptions(1));
  Architecture arch = Architecture::Modern();
  auto model = Model::Create(TinyConfig(arch), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 5);
  const std::vector<float> a = LastLogits(**model, {2, 7, 3, 4});
  const std::vector<float> b = LastLogits(**model, {7, 2, 3, 4});
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - b[i]);
  EXPECT_GT(diff, 1e-3);
}

TEST(RopeTest, ShiftingAllPositionsChangesNoAttentionScore) {
  // q·k after rotation depends only on the distance between positions: the
  // rope op at offset 0 and at offset 3 gives the same dot products.
  CpuBackend be(TestCpuOptions(1));
  const int64_t T = 4, D = 8, half = D / 2, P = 16;
  std::vector<float> cos(P * half), sin(P * half);
  for (int64_t m = 0; m < P; ++m) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = m * std::pow(10000.0, -2.0 * i / D);
      cos[m * half + i] = static_cast<float>(std::cos(angle));
      sin[m * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  Arena arena(be, 1 << 20);
  RopeTables tables{arena.Allocate({P, half}), arena.Allocate({P, half})};
  testing::FromHost(be, tables.cos, cos);
  testing::FromHost(be, tables.sin, sin);
  Rng rng(9);
  std::vector<float> x(T * 2 * D);  // rows: [q | k], one head each
  for (float& v : x) v = static_cast<float>(rng.Normal());
  Tensor in = arena.Allocate({1, T, 2 * D});
  testing::FromHost(be, in, x);
  auto scores = [&](int64_t offset) {
    Tape tape(be, arena);
    tape.set_grad_enabled(false);
    std::vector<float> r = ToHost(be, tape.value(Rope(tape, tape.Input(in), tables, T, D, 2 * D, offset)));
    std::vector<double> s;
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += r[i * 2 * D + d] * r[j * 2 * D + D + d];
        s.push_back(dot);
      }
    }
    return s;
  };
  const std::vector<double> s0 = scores(0), s3 = scores(3);
  for (size_t i = 0; i < s0.size(); ++i) EXPECT_NEAR(s0[i], s3[i], 1e-4) << i;
  // And the rotation did something: the offset changes the rotated values.
  EXPECT_NE(s0.size(), 0u);
}

}  // namespace
}  // namespace smallem
