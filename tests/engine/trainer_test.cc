// Whole training runs on the CPU: results, determinism, weights round trips
// and the errors a user sees for bad input.
#include "engine/train/trainer.h"

#include <filesystem>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/weights.h"
#include "engine/train/batches.h"
#include "engine/train/evaluate.h"
#include "engine/train/validation_text.h"
#include "gtest/gtest.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

RunSpec TinySpec(int64_t seed = 1) {
  RunSpec s = testing::TinyRunSpec(/*steps=*/30);
  s.seed = seed;
  return s;
}

std::string TempDir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("smallem-trainer-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  return p.string();
}

TEST(TrainerTest, ResultHasEveryDocumentedKey) {
  CpuBackend be(TestCpuOptions(2));
  const std::string out = TempDir("keys");
  auto result = Train(TinySpec(), be, TrainOptions{.out_dir = out});
  ASSERT_TRUE(result.ok()) << result.status();
  for (const char* key :
       {"val_nats_per_byte", "val_nats_per_token", "val_bits_per_byte", "eval_batches",
        "eval_spans", "eval_tokens", "eval_fingerprint", "steps", "tokens", "epochs", "train_seconds", "tokens_per_s", "mfu", "params", "peak_memory_bytes",
        "kv_cache_bytes_per_token", "device", "device_class", "config", "seed", "activations",
        "generation_tokens_per_s"}) {
    EXPECT_TRUE(result->contains(key)) << key;
  }
  EXPECT_GT((*result)["generation_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ((*result)["steps"], 30);
  EXPECT_EQ((*result)["tokens"], 30 * 4 * 32);
  // The tiny split holds fewer than the 8·16 spans asked for.
  auto data = Dataset::Open(TinySpec().data);
  ASSERT_TRUE(data.ok());
  auto text = PlanValidationText(static_cast<int64_t>(data->val.size()), 8);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ((*result)["eval_batches"], text->batches());
  EXPECT_EQ((*result)["eval_spans"], text->spans);
  EXPECT_EQ((*result)["eval_tokens"], text->spans * kValidationSpanTokens);
  EXPECT_EQ((*result)["eval_fingerprint"],
            ValidationFingerprint(*text, data->meta["content_hash"].get<std::string>()));
  EXPECT_TRUE((*result)["mfu"].is_null());
  EXPECT_EQ((*result)["activations"], "f32");
  const double npb = (*result)["val_nats_per_byte"];
  EXPECT_NEAR((*result)["val_bits_per_byte"].get<double>(), npb / std::log(2.0), 1e-12);
  EXPECT_TRUE(fs::exists(fs::path(out) / "weights.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "result.json"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "tokenizer.json"));
}

TEST(TrainerTest, LossFallsBelowTheUniformGuess) {
  CpuBackend be(TestCpuOptions(2));
  RunSpec spec = TinySpec();
  spec.budget.steps = 60;
  auto result = Train(spec, be, TrainOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  // A uniform guess over 300 tokens costs ln 300 ≈ 5.7 nats per token.
  EXPECT_LT((*result)["val_nats_per_token"].get<double>(), 0.75 * std::log(300.0));
}

TEST(TrainerTest, SameSeedSameLossDifferentSeedsDifferentLosses) {
  CpuBackend be(TestCpuOptions(2));
  auto a = Train(TinySpec(1), be, TrainOptions{});
  auto b = Train(TinySpec(1), be, TrainOptions{});
  auto c = Train(TinySpec(2), be, TrainOptions{});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)["val_nats_per_byte"].get<double>(), (*b)["val_nats_per_byte"].get<double>());
  EXPECT_NE((*a)["val_nats_per_byte"].get<double>(), (*c)["val_nats_per_byte"].get<double>());
}

TEST(TrainerTest, SaveLoadGivesTheIdenticalLoss) {
  CpuBackend be(TestCpuOptions(2));
  for (const char* arch : {"gpt2", "modern"}) {
    RunSpec spec = TinySpec();
    spec.architecture = *Architecture::FromPreset(arch);
    const std::string out = TempDir(std::string("saveload-") + arch);
    auto result = Train(spec, be, TrainOptions{.out_dir = out});
    ASSERT_TRUE(result.ok()) << result.status();
    auto model = LoadWeights(out + "/weights.safetensors", be);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->config().architecture, spec.architecture);
    auto data = Dataset::Open(spec.data);
    ASSERT_TRUE(data.ok());
    auto text = PlanValidationText(static_cast<int64_t>(data->val.size()), spec.eval_batches);
    ASSERT_TRUE(text.ok());
    Arena arena(be);
    const EvalResult again = Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(),
                                      *text, spec.eval_batch_size);
    EXPECT_EQ(again.nats_per_byte, (*result)["val_nats_per_byte"].get<double>()) << arch;
  }
}

TEST(TrainerTest, TruncatedWeightsFileIsAClearError) {
  CpuBackend be(TestCpuOptions(1));
  const std::string out = TempDir("truncated");
  ASSERT_TRUE(Train(TinySpec(), be, TrainOptions{.out_dir = out}).ok());
  const std::string path = out + "/weights.safetensors";
  fs::resize_file(path, fs::file_size(path) - 100);
  auto model = LoadWeights(path, be);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("truncated"), std::string::npos) << model.status();
}

TEST(TrainerTest, BadInputGivesClearErrors) {
  CpuBackend be(TestCpuOptions(1));
  RunSpec spec = TinySpec();
  spec.data = "/nonexistent/dataset";
  auto missing = Train(spec, be, TrainOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/dataset"), std::string::npos)
      << missing.status();

  spec = TinySpec();
  spec.heads = 3;
  auto heads = Train(spec, be, TrainOptions{});
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("not divisible by heads"), std::string::npos);

  auto arch = RunSpec::FromJson(nlohmann::json{{"arch", "gpt3"}});
  ASSERT_FALSE(arch.ok());
  EXPECT_NE(arch.status().message().find("unknown architecture \"gpt3\""), std::string::npos);
  auto key = RunSpec::FromJson(nlohmann::json{{"layerz", 3}});
  EXPECT_NE(key.status().message().find("unknown key \"layerz\""), std::string::npos);
}

TEST(TrainerTest, CorruptDatasetIsAClearError) {
  // A copy of the dataset with a damaged train.bin.
  const fs::path copy = TempDir("corrupt");
  fs::copy(testing::TinyDataset(), copy, fs::copy_options::recursive);
  {
    std::fstream f(copy / "train.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.write("\xff\xff\xff\xff", 4);
  }
  CpuBackend be(TestCpuOptions(1));
  RunSpec spec = TinySpec();
  spec.data = copy.string();
  auto result = Train(spec, be, TrainOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("train.bin"), std::string::npos) << result.status();
}

// The validation text does not depend on the training batch or context:
// a variant changing both is scored on the same target tokens.
TEST(TrainerTest, VariantChangingBatchAndContextIsScoredOnTheSameTargets) {
  CpuBackend be(TestCpuOptions(2));
  RunSpec base = TinySpec();
  base.budget.steps = 5;
  RunSpec variant = base;
  variant.batch = 8;
  variant.context = 64;
  auto a = Train(base, be, TrainOptions{});
  auto b = Train(variant, be, TrainOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)["eval_fingerprint"], (*b)["eval_fingerprint"]);
  EXPECT_EQ((*a)["eval_tokens"], (*b)["eval_tokens"]);
  EXPECT_NE((*a)["val_nats_per_byte"], (*b)["val_nats_per_byte"]);

  // The same target tokens, read by windows of each context.
  auto data = Dataset::Open(base.data);
  ASSERT_TRUE(data.ok());
  auto text = PlanValidationText(static_cast<int64_t>(data->val.size()), base.eval_batches);
  ASSERT_TRUE(text.ok());
  auto targets = [&](int64_t context) {
    std::vector<uint16_t> tokens;
    for (const ValidationWindow& w : ValidationWindows(*text, context)) {
      for (int64_t p = w.first_target(); p <= w.start + w.length; ++p) {
        tokens.push_back(data->val[p]);
      }
    }
    return tokens;
  };
  EXPECT_EQ(targets(base.context), targets(variant.context));
  EXPECT_EQ(static_cast<int64_t>(targets(base.context).size()), (*a)["eval_tokens"].get<int64_t>());
}

TEST(TrainerTest, ScoredLossDoesNotDependOnEvalBatchSize) {
  CpuBackend be(TestCpuOptions(2));
  for (int64_t context : {24, 96}) {  // several windows per span, and one
    RunSpec spec = TinySpec();
    spec.context = context;
    spec.budget.steps = 5;
    const std::string out = TempDir("eval-batch-" + std::to_string(context));
    auto result = Train(spec, be, TrainOptions{.out_dir = out});
    ASSERT_TRUE(result.ok()) << result.status();
    auto model = LoadWeights(out + "/weights.safetensors", be);
    ASSERT_TRUE(model.ok()) << model.status();
    auto data = Dataset::Open(spec.data);
    ASSERT_TRUE(data.ok());
    auto text = PlanValidationText(static_cast<int64_t>(data->val.size()), spec.eval_batches);
    ASSERT_TRUE(text.ok());
    Arena arena(be);
    const double trained = (*result)["val_nats_per_byte"];
    for (int64_t rows : {1, 3, 16, 1000}) {
      const EvalResult r =
          Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(), *text, rows);
      EXPECT_EQ(r.tokens, text->targets());
      EXPECT_NEAR(r.nats_per_byte, trained, 1e-6 * trained) << rows << " rows per pass";
    }
  }
}

TEST(TrainBatchesTest, SeedsChangeOrderOnlyAndTheStreamWraps) {
  std::vector<uint16_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  TrainBatches a(tokens, 2, 10, 1), b(tokens, 2, 10, 2);
  std::vector<int32_t> ia(20), ta(20), ib(20), tb(20);
  a.Next(ia.data(), ta.data());
  b.Next(ib.data(), tb.data());
  EXPECT_NE(ia, ib);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ta[i], ia[i] + 1);
  for (int i = 0; i < 60; ++i) a.Next(ia.data(), ta.data());
  EXPECT_GT(a.epochs(), 1.0);
}

}  // namespace
}  // namespace smallem
