// Budgets on the CPU: a {minutes: M} budget measures training time only and
// stops within one step of it, with the learning rate decayed to its floor;
// a {steps: N} budget records its training seconds too.
//
// What "ends fully decayed" means here: the schedule is a function of the
// fraction of the budget done (steps done / N, or training seconds / budget
// seconds), and a run trains until that fraction reaches 1, where the cosine
// is at its floor lr·min_lr_ratio. The result's "final_lr" is the schedule's
// value where training stopped (the fraction clamped to 1), so it is the
// floor for every run that reaches its budget, timed or not. Each update uses
// the schedule at the fraction where its step began (for a steps budget,
// step k of N at k/N), so the last one is within one step of the floor —
// negligible for real budgets of thousands of steps, where the cosine is flat.
#include <cmath>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/train/schedule.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

RunSpec TinySpec() { return testing::TinyRunSpec(/*steps=*/30); }

TEST(TimedBudgetTest, TimedRunStopsWithinOneStepOfItsBudgetAtTheFloorLearningRate) {
  CpuBackend be(TestCpuOptions(2));
  RunSpec spec = TinySpec();
  spec.budget = Budget{.steps = std::nullopt, .minutes = 0.05};  // 3 s of training
  const double budget_s = 0.05 * 60;
  // Training seconds after every step (progress callbacks are not training time).
  std::vector<double> elapsed;
  TrainOptions options{
      .out_dir = "",
      .progress_every = 1,
      .on_progress = [&](const TrainProgress& p) { elapsed.push_back(p.elapsed_s); },
      .on_warning = nullptr,
      .stop = nullptr};
  auto result = Train(spec, be, options);
  ASSERT_TRUE(result.ok()) << result.status();

  const int64_t steps = (*result)["steps"];
  const double train_s = (*result)["train_seconds"];
  ASSERT_GE(steps, 2);
  ASSERT_EQ(elapsed.size(), static_cast<size_t>(steps));
  EXPECT_EQ(elapsed.back(), train_s);
  // It reached its budget, and the step before the last had not: the run
  // stopped within one step. (Checked against the last step's own duration,
  // not the mean steps/train_seconds, so a slow last step on a busy machine
  // cannot fail the test; the mean is printed for reference.)
  const double last_step_s = elapsed[steps - 1] - elapsed[steps - 2];
  EXPECT_GE(train_s, budget_s);
  EXPECT_LT(elapsed[steps - 2], budget_s);
  EXPECT_LT(train_s - budget_s, last_step_s);
  std::printf(
      "timed run: %lld steps in %.4f s (budget %.1f s), mean step %.2f ms, last %.2f ms, "
      "over by %.2f ms\n",
      static_cast<long long>(steps), train_s, budget_s, 1e3 * train_s / steps, 1e3 * last_step_s,
      1e3 * (train_s - budget_s));
  EXPECT_EQ((*result)["tokens"].get<int64_t>(), steps * spec.batch * spec.context);
  EXPECT_NEAR((*result)["tokens_per_s"].get<double>(), steps * spec.batch * spec.context / train_s,
              1e-6 * steps * spec.batch * spec.context / train_s);

  // Fully decayed: the floor, lr·min_lr_ratio.
  const double floor = spec.lr * spec.min_lr_ratio;
  EXPECT_NEAR((*result)["final_lr"].get<double>(), floor, 1e-9 * floor);
}

TEST(TimedBudgetTest, StepsBudgetRecordsTrainingSecondsAndEndsAtTheFloor) {
  CpuBackend be(TestCpuOptions(2));
  RunSpec spec = TinySpec();
  auto result = Train(spec, be, TrainOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)["steps"], 30);
  EXPECT_EQ((*result)["tokens"], 30 * 4 * 32);
  EXPECT_GT((*result)["train_seconds"].get<double>(), 0);
  EXPECT_GT((*result)["tokens_per_s"].get<double>(), 0);
  const double floor = spec.lr * spec.min_lr_ratio;
  EXPECT_NEAR((*result)["final_lr"].get<double>(), floor, 1e-9 * floor);
}

TEST(TimedBudgetTest, ScheduleRunsOnTheFractionOfTheBudget) {
  const Schedule s{.lr = 1.0, .warmup = 0.1, .min_lr_ratio = 0.1};
  EXPECT_DOUBLE_EQ(s.At(0.0), 0.0);
  EXPECT_DOUBLE_EQ(s.At(0.05), 0.5);     // half-way through the warmup
  EXPECT_DOUBLE_EQ(s.At(0.1), 1.0);      // peak
  EXPECT_NEAR(s.At(0.55), 0.55, 1e-12);  // half-way down the cosine: (1 + 0.1) / 2
  EXPECT_DOUBLE_EQ(s.At(1.0), 0.1);      // the floor
  EXPECT_DOUBLE_EQ(s.At(1.7), 0.1);      // a timed run's last check may overshoot: clamped
  double previous = s.At(0.1);
  for (double f = 0.1; f <= 1.0; f += 0.01) {
    EXPECT_LE(s.At(f), previous + 1e-15) << f;  // decays monotonically
    previous = s.At(f);
  }
}

}  // namespace
}  // namespace smallem
