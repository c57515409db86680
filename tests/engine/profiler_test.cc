// The profiling backend: every call is forwarded and counted in its family,
// steps are cut at each optimizer step, and a training run shows the matmul
// counts that tell AdamW from Muon.
#include "engine/profiler.h"

#include <string>

#include "engine/cpu/cpu_backend.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

constexpr int kMatmul = static_cast<int>(Op::kMatmul);

class ProfilerTest : public ::testing::Test {
 protected:
  ProfilerTest() : cpu_(TestCpuOptions(1)), profiler_(cpu_), tensors_(profiler_) {}
  Tensor Alloc(Shape shape) { return tensors_.Allocate(shape); }
  void Product(const Tensor& a, const Tensor& b, const Tensor& out) {
    profiler_.Matmul(MatmulParams{.a = a, .b = b, .out = out, .m = 2, .n = 2, .k = 2});
  }

  CpuBackend cpu_;
  ProfilingBackend profiler_;
  testing::BackendTensors tensors_;
};

TEST_F(ProfilerTest, ForwardsAndCountsEachFamilyInsideAndOutsideTheOptimizer) {
  const Tensor a = Alloc({2, 2}), b = Alloc({2, 2}), c = Alloc({2, 2});
  profiler_.Fill(a, 1.0f);
  profiler_.Fill(b, 2.0f);
  profiler_.BeginSteps();
  Product(a, b, c);                                  // model
  profiler_.Add(BinaryParams{.a = a, .b = c, .out = c});
  profiler_.BeginOptimizer();
  Product(a, c, b);                                  // optimizer
  profiler_.EndOptimizer();
  Product(a, b, c);                                  // second step
  profiler_.BeginOptimizer();
  profiler_.EndOptimizer();
  Product(a, b, c);                                  // after the last step: no step

  EXPECT_EQ(c.f32()[0], 20.0f);  // forwarded: c = a·(a·(a + a·b)) is real
  ASSERT_EQ(profiler_.steps().size(), 2u);
  const ProfilingBackend::StepProfile& first = profiler_.steps()[0];
  EXPECT_EQ(first.families[kMatmul].calls, 2);
  EXPECT_EQ(first.families[kMatmul].optimizer_calls, 1);
  EXPECT_EQ(first.families[static_cast<int>(Op::kAdd)].calls, 1);
  EXPECT_EQ(first.families[ProfilingBackend::kFillFamily].calls, 0);  // before BeginSteps
  EXPECT_GE(first.seconds, first.optimizer_seconds);
  EXPECT_GE(first.families[kMatmul].seconds, first.families[kMatmul].optimizer_seconds);
  EXPECT_EQ(profiler_.steps()[1].families[kMatmul].calls, 1);
  EXPECT_EQ(profiler_.steps()[1].families[kMatmul].optimizer_calls, 0);
}

TEST_F(ProfilerTest, DescribesTheInnerDevice) {
  EXPECT_EQ(profiler_.Name(), cpu_.Name());
  EXPECT_EQ(profiler_.DeviceClass(), cpu_.DeviceClass());
  EXPECT_EQ(profiler_.ActivationDType(), DType::kF32);
  cpu_.set_activation_dtype(DType::kBF16);  // a profiled run stores what the device stores
  EXPECT_EQ(profiler_.ActivationDType(), DType::kBF16);
}

TEST_F(ProfilerTest, DisabledProfilingForwardsWithoutCounting) {
  const Tensor a = Alloc({2, 2}), b = Alloc({2, 2}), c = Alloc({2, 2});
  profiler_.set_enabled(false);
  profiler_.BeginSteps();
  profiler_.Fill(a, 1.0f);
  profiler_.Fill(b, 1.0f);
  Product(a, b, c);
  profiler_.BeginOptimizer();
  profiler_.EndOptimizer();
  EXPECT_EQ(c.f32()[0], 2.0f);
  EXPECT_TRUE(profiler_.steps().empty());
  EXPECT_EQ(profiler_.FormatTable(), "");
}

TEST_F(ProfilerTest, TableShowsStepOptimizerAndFamilies) {
  const Tensor a = Alloc({2, 2}), b = Alloc({2, 2}), c = Alloc({2, 2});
  profiler_.BeginSteps();
  for (int step = 0; step < 3; ++step) {
    Product(a, b, c);
    profiler_.BeginOptimizer();
    Product(a, b, c);
    profiler_.EndOptimizer();
  }
  const std::string table = profiler_.FormatTable();
  EXPECT_NE(table.find("mean per step over steps 2-3"), std::string::npos) << table;
  EXPECT_NE(table.find("matmul     2.0 calls"), std::string::npos) << table;
  EXPECT_NE(table.find("(optimizer: 1.0 calls"), std::string::npos) << table;
  EXPECT_NE(table.find("op family"), std::string::npos) << table;
}

RunSpec TinySpec(const std::string& optimizer) {
  RunSpec s = testing::TinyRunSpec(/*steps=*/3, /*eval_batches=*/2);
  s.optimizer = optimizer;
  return s;
}

// Muon adds 3 matmuls per Newton–Schulz iteration per stack — 2 GPT-2
// blocks make 3 stacks, (32,32) ×8, (128,32) ×2, (32,128) ×2 — or per matrix
// (12) with stack=off; SAMuon-lite adds 22 matrix-vector products per stack.
// The model's own matmuls are AdamW's count.
TEST(ProfiledTrainingTest, CountsTheMatmulsOfEachOptimizer) {
  struct Case {
    const char* optimizer;
    int64_t optimizer_matmuls;
  };
  int64_t model_matmuls = -1;
  for (const Case& c : {Case{"adamw", 0}, Case{"muon", 3 * 10 * 3}, Case{"muon:short", 3 * 4 * 3},
                        Case{"muon,stack=off", 3 * 10 * 12},
                        Case{"muon:short,boost=2", 3 * 4 * 3 + 22 * 3}}) {
    CpuBackend cpu(TestCpuOptions(2));
    ProfilingBackend profiler(cpu);
    absl::StatusOr<nlohmann::json> result = Train(TinySpec(c.optimizer), profiler, TrainOptions{});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(profiler.steps().size(), 3u) << c.optimizer;
    if (model_matmuls < 0) model_matmuls = profiler.steps()[0].families[kMatmul].calls;
    EXPECT_GE(model_matmuls, 27);  // 4 per block and the head, forward and both gradients
    for (const ProfilingBackend::StepProfile& step : profiler.steps()) {
      EXPECT_EQ(step.families[kMatmul].calls, model_matmuls + c.optimizer_matmuls) << c.optimizer;
      EXPECT_EQ(step.families[kMatmul].optimizer_calls, c.optimizer_matmuls) << c.optimizer;
      EXPECT_GT(step.optimizer_seconds, 0) << c.optimizer;
    }
  }
}

}  // namespace
}  // namespace smallem
