// Divergence is an outcome: a run whose loss or gradient goes non-finite
// stops at a progress step, long before its budget, with a result that says
// so (engine/train/trainer.h).
#include <cmath>
#include <filesystem>

#include "base/files.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

// A learning rate no model survives: the first updates overflow the weights.
RunSpec AbsurdRateSpec() {
  RunSpec s = testing::TinyRunSpec(/*steps=*/200);
  s.lr = 1e30;
  s.warmup = 0;
  return s;
}

TEST(DivergenceTest, AbsurdLearningRateEndsTheRunAsDivergedBeforeItsBudget) {
  CpuBackend be(TestCpuOptions(2));
  const fs::path out = fs::temp_directory_path() /
                       ("smallem-divergence-" + std::to_string(::getpid()));
  fs::remove_all(out);
  std::vector<int64_t> progress_steps;
  auto result = Train(AbsurdRateSpec(), be,
                      TrainOptions{.out_dir = out.string(), .progress_every = 5,
                                   .on_progress = [&](const TrainProgress& p) {
                                     progress_steps.push_back(p.step);
                                     EXPECT_TRUE(std::isfinite(p.loss)) << "step " << p.step;
                                   }});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)["diverged"], true);
  const int64_t step = (*result)["diverged_step"];
  EXPECT_GT(step, 0);
  EXPECT_LT(step, 200);
  EXPECT_EQ(step % 5, 0) << "stops at the progress step that found it";
  EXPECT_EQ((*result)["steps"], step);
  EXPECT_FALSE(result->contains("val_nats_per_byte"));
  // Every progress report came before the divergence, with a finite loss;
  // the last finite loss is the last one reported (null when none was).
  for (int64_t s : progress_steps) EXPECT_LT(s, step);
  if (progress_steps.empty()) {
    EXPECT_TRUE((*result)["last_finite_loss"].is_null());
  } else {
    EXPECT_TRUE((*result)["last_finite_loss"].is_number());
  }
  // result.json says the same; no weights were written.
  auto written = ReadFile((out / "result.json").string());
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(nlohmann::json::parse(*written)["diverged_step"], step);
  EXPECT_FALSE(fs::exists(out / "weights.safetensors"));
  fs::remove_all(out);
}

TEST(DivergenceTest, HealthyRunIsNotDiverged) {
  CpuBackend be(TestCpuOptions(2));
  auto result = Train(testing::TinyRunSpec(/*steps=*/20), be, TrainOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->contains("diverged"));
  EXPECT_EQ((*result)["steps"], 20);
}

}  // namespace
}  // namespace smallem
