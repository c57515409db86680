// The KV-cache generator against the batch forward pass of the model.
#include "engine/model/generator.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/engine/model_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

using testing::Randomize;
using testing::TinyConfig;
using testing::ToHost;
using testing::Tokens;

// Logits of the model's batch forward at every position of `ids`.
std::vector<float> BatchLogits(const Model& model, const std::vector<int32_t>& ids) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  return ToHost(be, tape.value(model.Logits(tape, Tokens(arena, be, ids), 1,
                                            static_cast<int64_t>(ids.size()))));
}

class GeneratorTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GeneratorTest, CachedLogitsEqualTheBatchForward) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(TinyConfig(*Architecture::FromPreset(GetParam())), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 3);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9};
  const std::vector<float> batch = BatchLogits(**model, ids);
  Generator gen(**model);
  const int64_t V = 11;
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::vector<float>& step = gen.Feed(ids[t]);
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_NEAR(step[v], batch[t * V + v], 1e-4) << "position " << t;
    }
  }
}

TEST_P(GeneratorTest, PastTheContextTheWindowSlides) {
  // One layer: its cached keys and values depend on their own token and
  // position only, so the slid cache must equal a fresh pass over the last
  // window (RoPE: distances are what matter; learned: the window is
  // re-encoded). With more layers a RoPE cache keeps rows computed while
  // older tokens were still visible — the usual sliding-window approximation.
  CpuBackend be(TestCpuOptions(1));
  ModelConfig config = TinyConfig(*Architecture::FromPreset(GetParam()));
  config.layers = 1;
  auto model = Model::Create(config, be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 4);
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};  // context is 6
  Generator gen(**model);
  std::vector<float> last;
  for (int32_t id : ids) last = gen.Feed(id);
  EXPECT_EQ(gen.cached_positions(), 6);
  const std::vector<int32_t> window(ids.end() - 6, ids.end());
  const std::vector<float> batch = BatchLogits(**model, window);
  const int64_t V = 11;
  for (int64_t v = 0; v < V; ++v) EXPECT_NEAR(last[v], batch[5 * V + v], 1e-4);
}

TEST_P(GeneratorTest, GreedySamplingIsDeterministic) {
  CpuBackend be(TestCpuOptions(1));
  auto model = Model::Create(TinyConfig(*Architecture::FromPreset(GetParam())), be);
  ASSERT_TRUE(model.ok());
  Randomize(**model, 5);
  Generator a(**model), b(**model);
  const auto x = a.Generate({1, 2}, 12, SampleOptions{.temperature = 0.8, .seed = 7});
  const auto y = b.Generate({1, 2}, 12, SampleOptions{.temperature = 0.8, .seed = 7});
  EXPECT_EQ(x, y);
  EXPECT_EQ(x.size(), 12u);
}

INSTANTIATE_TEST_SUITE_P(Presets, GeneratorTest, ::testing::Values("gpt2", "modern"));

}  // namespace
}  // namespace smallem
