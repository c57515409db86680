// The training step's per-step values read on the device (what lets a
// captured CUDA step replay with each step's learning rate): the ops give
// the same bits from device scalars as from arguments, and the trainer —
// device-resident split, staged batch starts and scalars, gathered batches —
// gives, step for step and bit for bit, the losses of a hand-written loop
// that builds its batches on the host and passes every scalar as an
// argument, as the trainer did before.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "corpus/dataset.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "engine/train/schedule.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

std::vector<uint32_t> Bits(const Tensor& t) {
  std::vector<uint32_t> bits(static_cast<size_t>(t.numel()));
  std::memcpy(bits.data(), t.data, t.bytes());
  return bits;
}

class StepScalarsOpTest : public testing::CpuOpTest {};

TEST_F(StepScalarsOpTest, AdamWFromDeviceScalarsEqualsAdamWFromArguments) {
  const Shape shape{5, 7, 11};
  const float lr = 3e-3f * 0.37f;
  for (float max_grad_norm : {0.0f, 0.5f}) {
    Tensor param[2], m[2], v[2];
    const Tensor grad = Random(shape), norm_sq = FromValues({1}, {4.0f});
    const Tensor p0 = Random(shape), m0 = Random(shape, -0.1f, 0.1f), v0 = Random(shape, 0, 0.01f);
    for (int i = 0; i < 2; ++i) {
      param[i] = Zeros(shape);
      m[i] = Zeros(shape);
      v[i] = Zeros(shape);
      std::memcpy(param[i].data, p0.data, p0.bytes());
      std::memcpy(m[i].data, m0.data, m0.bytes());
      std::memcpy(v[i].data, v0.data, v0.bytes());
    }
    const Tensor scalars = Zeros({AdamWStepScalars::kCount});
    for (int64_t step = 1; step <= 3; ++step) {
      const AdamWStepScalars s = MakeAdamWStepScalars(lr, 0.9f, 0.95f, step);
      scalars.f32()[0] = s.lr;
      scalars.f32()[1] = s.correction1;
      scalars.f32()[2] = s.correction2;
      const AdamWParams base{.grad = grad, .grad_norm_sq = norm_sq, .beta1 = 0.9f,
                             .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                             .max_grad_norm = max_grad_norm};
      AdamWParams by_argument = base, by_scalars = base;
      by_argument.param = param[0];
      by_argument.m = m[0];
      by_argument.v = v[0];
      by_argument.lr = lr;
      by_argument.step = step;
      by_scalars.param = param[1];
      by_scalars.m = m[1];
      by_scalars.v = v[1];
      by_scalars.scalars = scalars;
      by_scalars.lr = 99.0f;  // ignored: the scalars win
      by_scalars.step = 1000;
      backend_.AdamW(by_argument);
      backend_.AdamW(by_scalars);
    }
    EXPECT_EQ(Bits(param[0]), Bits(param[1])) << "max_grad_norm " << max_grad_norm;
    EXPECT_EQ(Bits(m[0]), Bits(m[1]));
    EXPECT_EQ(Bits(v[0]), Bits(v[1]));
  }
}

TEST_F(StepScalarsOpTest, BiasCorrectionsAreTheDoubleFormulaRoundedOnce) {
  const AdamWStepScalars s = MakeAdamWStepScalars(0.5f, 0.9f, 0.95f, 7);
  EXPECT_EQ(s.lr, 0.5f);
  EXPECT_EQ(s.correction1, static_cast<float>(1.0 / (1.0 - std::pow(double{0.9f}, 7.0))));
  EXPECT_EQ(s.correction2, static_cast<float>(1.0 / (1.0 - std::pow(double{0.95f}, 7.0))));
}

TEST_F(StepScalarsOpTest, RowScaleByADeviceScaleEqualsScalingByTheProduct) {
  const Tensor in = Random({9, 13}), denom = Random({9}, 0.5f, 2.0f);
  const Tensor scale = FromValues({1}, {-0.0371f});
  const Tensor a = Zeros({9, 13}), b = Zeros({9, 13});
  backend_.RowScale({.in = in, .out = a, .denom = denom, .alpha = 0.75f * -0.0371f, .eps = 1e-3f});
  backend_.RowScale({.in = in, .out = b, .denom = denom, .scale = scale, .alpha = 0.75f,
                     .eps = 1e-3f});
  EXPECT_EQ(Bits(a), Bits(b));
}

RunSpec TinySpec(const std::string& optimizer, const Architecture& arch) {
  RunSpec s = testing::TinyRunSpec(/*steps=*/12, /*eval_batches=*/4);
  s.seed = 7;
  s.optimizer = optimizer;
  s.architecture = arch;
  return s;
}

// Every step's training loss from Train().
std::vector<float> TrainerLosses(const RunSpec& spec) {
  CpuBackend backend(TestCpuOptions(2));
  std::vector<float> losses;
  TrainOptions options;
  options.progress_every = 1;
  options.on_progress = [&](const TrainProgress& p) {
    losses.push_back(static_cast<float>(p.loss));
  };
  absl::StatusOr<nlohmann::json> result = Train(spec, backend, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) EXPECT_FALSE((*result)["cuda_graphs"].get<bool>()) << "the CPU has no graphs";
  return losses;
}

// The trainer's step written out by hand the way it used to run: batches
// built on the host (TrainBatches::Next) and copied in, then either AdamW
// with the learning rate and step count as kernel arguments (`adamw`), or
// the optimizer's own Step (anything else); the loss the trainer's
// (Model::TrainingObjective).
std::vector<float> HandWrittenLosses(const RunSpec& spec) {
  CpuBackend be(TestCpuOptions(2));
  absl::StatusOr<Dataset> data = Dataset::Open(spec.data);
  CHECK(data.ok()) << data.status();
  const ModelConfig config = spec.ModelFor(data->vocab());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, be);
  CHECK(model.ok()) << model.status();
  (*model)->Initialize(static_cast<uint64_t>(spec.seed));
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  CHECK(optimizer.ok()) << optimizer.status();
  const bool plain_adamw = spec.optimizer == "adamw";

  const int64_t B = spec.batch, T = spec.context, steps = *spec.budget.steps;
  const int64_t n = (*model)->ParameterCount();
  std::vector<float> moments(static_cast<size_t>(2 * n + 1), 0.0f);
  const Tensor norm_sq{.data = moments.data() + 2 * n, .shape = {1}};
  const Schedule schedule{.lr = 1.0, .warmup = spec.warmup, .min_lr_ratio = spec.min_lr_ratio};
  TrainBatches batches(data->train, B, T, TrainBatchSeed(spec.seed));
  Arena arena(be);
  Tape tape(be, arena);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<float> losses;
  for (int64_t step = 0; step < steps; ++step) {
    const auto lr_scale =
        static_cast<float>(schedule.At(static_cast<double>(step) / static_cast<double>(steps)));
    batches.Next(inputs.data(), targets.data());
    arena.Reset();
    tape.Reset();
    const Tensor in = arena.Allocate({B * T}, DType::kI32);
    const Tensor tg = arena.Allocate({B * T}, DType::kI32);
    be.CopyToDevice(in.data, inputs.data(), in.bytes());
    be.CopyToDevice(tg.data, targets.data(), tg.bytes());
    (*model)->ZeroGrad();
    const Var loss = (*model)->TrainingObjective(tape, in, tg, B, T).total;
    tape.Backward(loss);
    if (!plain_adamw) {
      (*optimizer)->Step(lr_scale);
    } else {
      be.SumSquares(ReduceParams{.in = (*model)->grads(), .out = norm_sq});
      int64_t offset = 0;
      for (const Model::Parameter& p : (*model)->parameters()) {
        be.AdamW(AdamWParams{
            .param = p.value, .grad = p.grad,
            .m = Tensor{.data = moments.data() + offset, .shape = p.value.shape},
            .v = Tensor{.data = moments.data() + n + offset, .shape = p.value.shape},
            .grad_norm_sq = norm_sq,
            .lr = static_cast<float>(spec.lr) * lr_scale,
            .beta1 = static_cast<float>(spec.beta1), .beta2 = static_cast<float>(spec.beta2),
            .eps = 1e-8f,
            .weight_decay = p.decay ? static_cast<float>(spec.weight_decay) : 0.0f,
            .max_grad_norm = static_cast<float>(spec.grad_clip), .step = step + 1});
        offset += p.value.numel();
      }
    }
    losses.push_back(tape.value(loss).f32()[0]);
  }
  return losses;
}

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

TEST(StepScalarsTrainingTest, AdamWStepsEqualAHandWrittenLoopWithScalarArguments) {
  for (const Architecture& arch : {Architecture::Gpt2(), Architecture::Modern()}) {
    const RunSpec spec = TinySpec("adamw", arch);
    const std::vector<float> want = HandWrittenLosses(spec);
    ASSERT_EQ(want.size(), 12u);
    // The loss moves: a comparison of constants would prove nothing.
    EXPECT_LT(want.back(), want.front() - 0.1f);
    EXPECT_EQ(Bits(TrainerLosses(spec)), Bits(want)) << spec.ToJson().dump();
  }
}

TEST(StepScalarsTrainingTest, MuonStepsEqualAHandWrittenLoopWithHostBatches) {
  // period=2 alternates both update variants; norm and boost use every
  // per-row op.
  for (const char* optimizer : {"muon:short", "muon:short,period=2,norm,boost=2"}) {
    const RunSpec spec = TinySpec(optimizer, Architecture::Gpt2());
    const std::vector<float> want = HandWrittenLosses(spec);
    ASSERT_EQ(want.size(), 12u);
    EXPECT_LT(want.back(), want.front() - 0.1f);
    EXPECT_EQ(Bits(TrainerLosses(spec)), Bits(want)) << optimizer;
  }
}

TEST(StepScalarsTrainingTest, GraphsSwitchedOffTrainTheSameOnTheCpu) {
  RunSpec spec = TinySpec("adamw", Architecture::Modern());
  spec.budget.steps = 5;
  CpuBackend backend(TestCpuOptions(2));
  absl::StatusOr<nlohmann::json> on = Train(spec, backend, TrainOptions{});
  absl::StatusOr<nlohmann::json> off = Train(spec, backend, TrainOptions{.cuda_graphs = false});
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_EQ((*on)["val_nats_per_byte"].get<double>(), (*off)["val_nats_per_byte"].get<double>());
  EXPECT_FALSE((*on)["cuda_graphs"].get<bool>());
}

TEST(ArenaTest, SameRequestsAfterResetGetTheSameAddresses) {
  CpuBackend be(TestCpuOptions(1));
  Arena arena(be, 1 << 12);
  std::vector<void*> first;
  for (int round = 0; round < 3; ++round) {
    arena.Reset();
    std::vector<void*> got;
    for (int64_t n : {100, 3000, 7, 900}) got.push_back(arena.Allocate({n}).data);
    if (round == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first);
    }
  }
  // 448 bytes in a 4 KiB block; 12032 in a block of their own; the last two
  // (64 + 3648) in a third: taken in the first round only.
  EXPECT_EQ(arena.blocks(), 3);
}

TEST(ArenaTest, GrowingWhenForbiddenDiesNamingTheSize) {
  CpuBackend be(TestCpuOptions(1));
  Arena arena(be, 1 << 12);
  arena.Allocate({1000});
  arena.Reset();
  arena.set_growth_allowed(false);
  arena.Allocate({1000});  // fits in what the first round took
  EXPECT_DEATH(arena.Allocate({1000}), "asked for 4032 more bytes");
}

}  // namespace
}  // namespace smallem
