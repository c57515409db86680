// StepRunner (engine/train/step_runner.h) on the CPU, with graphs played by
// a test backend: it forwards every call to a CpuBackend and "captures" a
// step by recording it without running anything (as CUDA does: a memory
// call or a host copy inside it is counted as a failure), then replays it
// by running the same calls again.
//
//  * Replayed steps give the eager steps' losses bit for bit (AdamW on
//    learned positions, Muon `period=2`, which alternates two variants).
//  * The first kWarmupSteps steps are eager; each update variant is
//    captured once, the first time it comes after the warm-up and after it
//    ran eagerly, and replayed from then on.
//  * A step copies nothing from the host (the learned-position ids are a
//    model constant) and allocates nothing after the warm-up.
//  * Release destroys the graphs and lets the arena grow again.
#include "engine/train/step_runner.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "engine/arena.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "corpus/dataset.h"
#include "engine/forwarding_backend.h"
#include "engine/model/model.h"
#include "engine/op_list.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

// The CpuBackend a ReplayingBackend forwards to: a base class, so that it is
// constructed before the ForwardingBackend that refers to it.
struct OwnedCpuBackend {
  CpuBackend cpu{TestCpuOptions(2)};
};

// A CpuBackend with pretend graphs. While capturing, ops are recorded, not
// run; LaunchGraph runs the recorded step again, eagerly.
class ReplayingBackend final : private OwnedCpuBackend, public ForwardingBackend {
 public:
  ReplayingBackend() : ForwardingBackend(cpu) {}

  std::string Name() const override { return "cpu (replaying)"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    ++allocations_;
    if (capturing_) ADD_FAILURE() << "Allocate(" << bytes << ") inside a capture";
    return ForwardingBackend::Allocate(bytes);
  }
  void Free(void* ptr) override {
    if (capturing_) ADD_FAILURE() << "Free inside a capture";
    ForwardingBackend::Free(ptr);
  }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (capturing_) {
      ++host_copies_captured_;
      return;
    }
    ForwardingBackend::CopyToDevice(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (capturing_) ADD_FAILURE() << "CopyToHost inside a capture";
    ForwardingBackend::CopyToHost(dst, src, bytes);
  }
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    if (Live()) ForwardingBackend::CopyOnDevice(dst, src, bytes);
  }
  void Fill(Tensor t, float value) override {
    if (Live()) ForwardingBackend::Fill(t, value);
  }
  void Synchronize() override {
    if (capturing_) ADD_FAILURE() << "Synchronize inside a capture";
  }

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    ++allocations_;
    if (capturing_) ADD_FAILURE() << "AllocateStaging inside a capture";
    return ForwardingBackend::AllocateStaging(bytes);
  }
  void UploadStaged(void* dst, const void* src, size_t bytes) override {
    if (Live()) ForwardingBackend::UploadStaged(dst, src, bytes);
  }
  void WaitStaged() override {
    if (capturing_) ADD_FAILURE() << "WaitStaged inside a capture";
  }

  bool SupportsGraphs() const override { return true; }
  absl::StatusOr<int> CaptureGraph(const std::function<void()>& record) override {
    capturing_ = true;
    record();
    capturing_ = false;
    graphs_.push_back(record);
    return static_cast<int>(graphs_.size()) - 1;
  }
  void LaunchGraph(int graph) override {
    ++launches_;
    graphs_.at(static_cast<size_t>(graph))();
  }
  void ReleaseGraphs() override {
    ++releases_;
    graphs_.clear();
  }

#define SMALLEM_REPLAYED_OP(Method, Params, op) \
  void Method(const Params& p) override {        \
    if (Live()) ForwardingBackend::Method(p);    \
  }
  SMALLEM_BACKEND_OPS(SMALLEM_REPLAYED_OP)
#undef SMALLEM_REPLAYED_OP

  int64_t allocations() const { return allocations_; }
  int64_t host_copies_captured() const { return host_copies_captured_; }
  int graphs() const { return static_cast<int>(graphs_.size()); }
  int64_t launches() const { return launches_; }
  int64_t releases() const { return releases_; }

 private:
  // Whether an op runs now (false: it is being recorded).
  bool Live() const { return !capturing_; }

  bool capturing_ = false;
  std::vector<std::function<void()>> graphs_;
  int64_t allocations_ = 0;
  int64_t host_copies_captured_ = 0;
  int64_t launches_ = 0;
  int64_t releases_ = 0;
};

RunSpec TinySpec(const std::string& optimizer) {
  RunSpec s = testing::TinyRunSpec(/*steps=*/10);
  s.optimizer = optimizer;
  s.architecture = Architecture::Gpt2();  // learned positions
  s.seed = 3;
  return s;
}

// What a run of `steps` steps through a StepRunner saw, step by step.
struct StepRun {
  std::vector<float> losses;
  std::vector<int> graphs;           // graphs held after each step
  std::vector<int64_t> launches;     // graph launches so far after each step
  std::vector<int64_t> allocations;  // backend allocations so far after each step
  int64_t host_copies_captured = 0;
  int64_t releases = 0;
};

template <typename B>
StepRun RunSteps(const RunSpec& spec, B& backend, bool graphs, int64_t steps) {
  absl::StatusOr<Dataset> data = Dataset::Open(spec.data);
  CHECK(data.ok()) << data.status();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec.ModelFor(data->vocab()), backend);
  CHECK(model.ok()) << model.status();
  (*model)->Initialize(static_cast<uint64_t>(spec.seed));
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  CHECK(optimizer.ok()) << optimizer.status();
  Arena arena(backend);
  Tape tape(backend, arena);
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::Create(
      **model, **optimizer, arena, tape, data->train,
      StepRunner::Options{.batch = spec.batch, .time = spec.context, .graphs = graphs});
  CHECK(runner.ok()) << runner.status();
  TrainBatches batches(data->train, spec.batch, spec.context, TrainBatchSeed(spec.seed));
  std::vector<int64_t> starts(static_cast<size_t>(spec.batch));
  StepRun run;
  for (int64_t step = 0; step < steps; ++step) {
    batches.NextStarts(starts.data());
    const float lr = 1.0f - 0.05f * static_cast<float>(step);  // changes every step
    EXPECT_TRUE((*runner)->Run(step, starts, lr).ok());
    run.losses.push_back((*runner)->ReadLoss());
    if constexpr (std::is_same_v<B, ReplayingBackend>) {
      run.graphs.push_back(backend.graphs());
      run.launches.push_back(backend.launches());
      run.allocations.push_back(backend.allocations());
    }
  }
  (*runner)->Release();
  if constexpr (std::is_same_v<B, ReplayingBackend>) {
    run.host_copies_captured = backend.host_copies_captured();
    run.releases = backend.releases();
    EXPECT_EQ(backend.graphs(), 0) << "Release destroys the graphs";
  }
  // Released: evaluation after training may ask the arena for more (a
  // CHECK failure otherwise).
  arena.Allocate({int64_t{1} << 22});
  return run;
}

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

TEST(StepRunnerTest, ReplayedStepsEqualEagerStepsBitForBit) {
  for (const char* optimizer : {"adamw", "muon:short,period=2"}) {
    const RunSpec spec = TinySpec(optimizer);
    CpuBackend cpu(TestCpuOptions(2));
    const StepRun eager = RunSteps(spec, cpu, /*graphs=*/true, 10);  // the CPU has none
    ReplayingBackend replaying;
    const StepRun replayed = RunSteps(spec, replaying, /*graphs=*/true, 10);
    ASSERT_EQ(eager.losses.size(), 10u);
    EXPECT_LT(eager.losses.back(), eager.losses.front()) << "the loss moves";
    EXPECT_EQ(Bits(replayed.losses), Bits(eager.losses)) << optimizer;
    EXPECT_GT(replayed.launches.back(), 0) << optimizer;
  }
}

TEST(StepRunnerTest, EachUpdateVariantIsCapturedOnceAfterTheWarmup) {
  ReplayingBackend adamw_backend;
  const StepRun adamw = RunSteps(TinySpec("adamw"), adamw_backend, /*graphs=*/true, 7);
  for (int64_t s = 0; s < 7; ++s) {
    EXPECT_EQ(adamw.graphs[s], s < kWarmupSteps ? 0 : 1) << "after step " << s;
    EXPECT_EQ(adamw.launches[s], s < kWarmupSteps ? 0 : s - kWarmupSteps + 1)
        << "after step " << s;
  }
  EXPECT_EQ(adamw.releases, 1);

  // period=2 alternates orthogonalizing and row-normalizing steps: two
  // variants, each captured at its first step after the warm-up.
  ReplayingBackend muon_backend;
  const StepRun muon =
      RunSteps(TinySpec("muon:short,period=2"), muon_backend, /*graphs=*/true, 7);
  for (int64_t s = 0; s < 7; ++s) {
    const int want = s < kWarmupSteps ? 0 : s == kWarmupSteps ? 1 : 2;
    EXPECT_EQ(muon.graphs[s], want) << "after step " << s;
  }
}

TEST(StepRunnerTest, GraphsSwitchedOffRunEveryStepEagerly) {
  ReplayingBackend backend;
  const StepRun run = RunSteps(TinySpec("adamw"), backend, /*graphs=*/false, 6);
  EXPECT_EQ(run.graphs.back(), 0);
  EXPECT_EQ(run.launches.back(), 0);
}

TEST(StepRunnerTest, AStepCopiesNothingFromTheHostAndAllocatesNothingAfterTheWarmup) {
  ReplayingBackend backend;
  const StepRun run = RunSteps(TinySpec("adamw"), backend, /*graphs=*/true, 8);
  // Learned positions: their ids are a constant of the model, uploaded by
  // the first (eager) step; per-step values come through UploadStaged.
  EXPECT_EQ(run.host_copies_captured, 0);
  for (int64_t s = kWarmupSteps; s < 8; ++s) {
    EXPECT_EQ(run.allocations[s], run.allocations[kWarmupSteps - 1]) << "after step " << s;
  }
}

TEST(StepRunnerTest, ReadLossBeforeAnyStepIsNaN) {
  CpuBackend backend(TestCpuOptions(1));
  const RunSpec spec = TinySpec("adamw");
  absl::StatusOr<Dataset> data = Dataset::Open(spec.data);
  ASSERT_TRUE(data.ok());
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec.ModelFor(data->vocab()), backend);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  ASSERT_TRUE(optimizer.ok());
  Arena arena(backend);
  Tape tape(backend, arena);
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::Create(
      **model, **optimizer, arena, tape, data->train,
      StepRunner::Options{.batch = spec.batch, .time = spec.context});
  ASSERT_TRUE(runner.ok());
  EXPECT_TRUE(std::isnan((*runner)->ReadLoss()));
  EXPECT_FALSE((*runner)->graphs_used());
}

}  // namespace
}  // namespace smallem
