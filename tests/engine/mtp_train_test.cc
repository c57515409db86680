// Multi-token prediction in whole training runs on the CPU: a tiny MTP model
// learns, its result reports each depth's validation loss, and its weights
// file loads for evaluation (the same loss) and for generation.
#include <cmath>
#include <filesystem>

#include "engine/arena.h"
#include "engine/cpu/cpu_backend.h"
#include "corpus/dataset.h"
#include "engine/model/generator.h"
#include "engine/model/weights.h"
#include "engine/train/evaluate.h"
#include "engine/train/trainer.h"
#include "engine/train/validation_text.h"
#include "gtest/gtest.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

TEST(MtpTrainTest, TinyMtpRunLearnsReportsEachDepthAndItsFileGenerates) {
  CpuBackend be(TestCpuOptions(2));
  RunSpec spec = testing::TinyRunSpec(/*steps=*/60);
  spec.mtp = 2;
  const fs::path out = fs::temp_directory_path() /
                       ("smallem-mtp-train-" + std::to_string(::getpid()));
  fs::remove_all(out);
  auto result = Train(spec, be, TrainOptions{.out_dir = out.string()});
  ASSERT_TRUE(result.ok()) << result.status();

  // It learns: a uniform guess over 300 tokens costs ln 300 ≈ 5.7 nats.
  const double next_token = (*result)["val_nats_per_token"];
  EXPECT_LT(next_token, 0.75 * std::log(300.0));
  ASSERT_TRUE(result->contains("val_mtp_nats_per_token")) << result->dump();
  const nlohmann::json& depths = (*result)["val_mtp_nats_per_token"];
  ASSERT_EQ(depths.size(), 2u);
  for (const nlohmann::json& d : depths) {
    EXPECT_TRUE(std::isfinite(d.get<double>()));
    EXPECT_GT(d.get<double>(), 0.0);
    EXPECT_LT(d.get<double>(), std::log(300.0)) << "depth untrained";
  }
  const ModelConfig config = spec.ModelFor(300);
  EXPECT_EQ((*result)["mtp_params"], config.MtpParameterCount());
  EXPECT_EQ((*result)["params"], config.ParameterCount() - config.MtpParameterCount());
  EXPECT_EQ((*result)["config"]["mtp"], 2);
  EXPECT_EQ((*result)["model"]["mtp"], 2);

  // The file: same validation losses when evaluated again, next-token and
  // per depth.
  auto model = LoadWeights((out / "weights.safetensors").string(), be);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().mtp, 2);
  auto data = Dataset::Open(spec.data);
  ASSERT_TRUE(data.ok());
  auto text = PlanValidationText(static_cast<int64_t>(data->val.size()), spec.eval_batches);
  ASSERT_TRUE(text.ok());
  Arena arena(be);
  const EvalResult eval = Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(),
                                   *text, spec.eval_batch_size);
  EXPECT_NEAR(eval.nats_per_token, next_token, 1e-9);
  ASSERT_EQ(eval.mtp_nats_per_token.size(), 2u);
  EXPECT_NEAR(eval.mtp_nats_per_token[0], depths[0].get<double>(), 1e-9);
  EXPECT_NEAR(eval.mtp_nats_per_token[1], depths[1].get<double>(), 1e-9);

  // Generation reads the main model only and runs from this file.
  Generator generator(**model);
  const std::vector<int32_t> tokens =
      generator.Generate({1, 2, 3}, 20, SampleOptions{.temperature = 0});
  EXPECT_EQ(tokens.size(), 20u);
  for (int32_t t : tokens) EXPECT_TRUE(t >= 0 && t < 300) << t;
  fs::remove_all(out);
}

TEST(MtpTrainTest, WithoutMtpTheResultHasNoDepthKeys) {
  CpuBackend be(TestCpuOptions(2));
  auto result = Train(testing::TinyRunSpec(/*steps=*/5), be, TrainOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->contains("val_mtp_nats_per_token"));
  EXPECT_FALSE(result->contains("mtp_params"));
  EXPECT_FALSE((*result)["config"].contains("mtp"));
}

}  // namespace
}  // namespace smallem
