#include "engine/train/step_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/status_macros.h"
#include "engine/autograd/ops.h"

namespace smallem {

absl::StatusOr<std::unique_ptr<StepRunner>> StepRunner::Create(Model& model, Optimizer& optimizer,
                                                               Arena& arena, Tape& tape,
                                                               std::span<const uint16_t> split,
                                                               const Options& options) {
  CHECK(options.batch > 0 && options.time > 0)
      << "StepRunner: batch " << options.batch << " and time " << options.time;
  std::unique_ptr<StepRunner> runner(new StepRunner(model, optimizer, arena, tape, options));
  RETURN_IF_ERROR(runner->AllocateInputs(split));
  RETURN_IF_ERROR(runner->AllocateHealth());
  return runner;
}

StepRunner::StepRunner(Model& model, Optimizer& optimizer, Arena& arena, Tape& tape,
                       const Options& options)
    : model_(model),
      optimizer_(optimizer),
      backend_(model.backend()),
      arena_(arena),
      tape_(tape),
      options_(options),
      use_graphs_(options.graphs && model.backend().SupportsGraphs()) {}

StepRunner::~StepRunner() {
  // The graphs replay on the memory freed below: they go first.
  Release();
  if (inputs_staging_ != nullptr) backend_.FreeStaging(inputs_staging_);
  if (inputs_device_ != nullptr) backend_.Free(inputs_device_);
  if (health_block_ != nullptr) backend_.Free(health_block_);
  if (tokens_.data != nullptr) backend_.Free(tokens_.data);
}

absl::Status StepRunner::AllocateInputs(std::span<const uint16_t> split) {
  const auto count = static_cast<int64_t>(split.size());
  CHECK_GT(count, options_.time + 1) << "StepRunner: the split holds no sequence";
  ASSIGN_OR_RETURN(void* tokens, backend_.Allocate(static_cast<size_t>(count) * sizeof(int32_t)));
  tokens_ = Tensor{.data = tokens, .shape = {count}, .dtype = DType::kI32};
  // The split as i32, converted a chunk at a time.
  std::vector<int32_t> chunk(static_cast<size_t>(std::min<int64_t>(count, int64_t{1} << 20)));
  for (int64_t begin = 0; begin < count; begin += static_cast<int64_t>(chunk.size())) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(chunk.size()), count - begin);
    std::copy(split.begin() + begin, split.begin() + begin + n, chunk.begin());
    backend_.CopyToDevice(tokens_.i32() + begin, chunk.data(),
                          static_cast<size_t>(n) * sizeof(int32_t));
  }

  // One block for the per-step values, so a step uploads them with one
  // copy: the starts, padded to 64 bytes, then the optimizer's scalars.
  const int64_t batch = options_.batch, scalars = optimizer_.ScalarCount();
  const int64_t starts_words = (batch + 15) / 16 * 16;
  inputs_bytes_ = static_cast<size_t>(starts_words + std::max<int64_t>(scalars, 1)) * 4;
  ASSIGN_OR_RETURN(inputs_device_, backend_.Allocate(inputs_bytes_));
  ASSIGN_OR_RETURN(inputs_staging_, backend_.AllocateStaging(inputs_bytes_));
  starts_ = Tensor{.data = inputs_device_, .shape = {batch}, .dtype = DType::kI32};
  scalars_ = Tensor{.data = static_cast<int32_t*>(inputs_device_) + starts_words,
                    .shape = {scalars}};
  host_starts_ = static_cast<int32_t*>(inputs_staging_);
  host_scalars_ = reinterpret_cast<float*>(host_starts_ + starts_words);
  return absl::OkStatus();
}

absl::Status StepRunner::AllocateHealth() {
  constexpr int kWords = 16;  // 64 bytes
  ASSIGN_OR_RETURN(health_block_, backend_.Allocate(kWords * sizeof(float)));
  float* block = static_cast<float*>(health_block_);
  const float zeros[kWords] = {};
  backend_.CopyToDevice(block, zeros, sizeof(zeros));
  checked_ = Tensor{.data = block, .shape = {2}};
  zeros_ = Tensor{.data = block + 2, .shape = {2}};
  probe_ = Tensor{.data = block + 4, .shape = {2}};
  health_ = Tensor{.data = block + 6, .shape = {1}};
  return absl::OkStatus();
}

void StepRunner::RecordHealthCheck() {
  // The same four calls every step, all on the device (capturable). ‖g‖² is
  // the optimizer's where its update computed it (AdamW's clipping).
  if (const Tensor norm_sq = optimizer_.GradNormSquared(); !norm_sq.empty()) {
    backend_.CopyOnDevice(checked_.data, norm_sq.data, sizeof(float));
  } else {
    backend_.SumSquares(
        ReduceParams{.in = model_.grads(), .out = Tensor{.data = checked_.data, .shape = {1}}});
  }
  backend_.CopyOnDevice(checked_.f32() + 1, loss_.data, sizeof(float));
  backend_.Mul(BinaryParams{.a = checked_, .b = zeros_, .out = probe_});
  backend_.Sum(ReduceParams{.in = probe_, .out = health_, .accumulate = true});
}

void StepRunner::RecordStep() {
  const int64_t B = options_.batch, T = options_.time;
  arena_.Reset();
  tape_.Reset();
  backend_.UploadStaged(inputs_device_, inputs_staging_, inputs_bytes_);
  const Tensor inputs = arena_.Allocate({B * T}, DType::kI32);
  const Tensor targets = arena_.Allocate({B * T}, DType::kI32);
  backend_.GatherSequences(GatherSequencesParams{
      .tokens = tokens_, .starts = starts_, .inputs = inputs, .targets = targets, .time = T});
  model_.ZeroGrad();
  // With multi-token prediction the step minimizes the depths' losses too,
  // and reports the next-token loss alone (engine/model/mtp.h).
  const Model::TrainingLoss loss = model_.TrainingObjective(tape_, inputs, targets, B, T);
  tape_.Backward(loss.total);
  loss_ = tape_.value(loss.next_token);
  optimizer_.Update(scalars_);
  RecordHealthCheck();  // after the update, which may compute ‖g‖² already
  model_.BalanceExperts();  // MoE routers' bias balancing, outside the gradient
}

absl::Status StepRunner::Run(int64_t step, std::span<const int64_t> starts,
                             float lr_multiplier) {
  using Clock = std::chrono::steady_clock;
  CHECK(!released_) << "StepRunner::Run after Release";
  CHECK_EQ(static_cast<int64_t>(starts.size()), options_.batch) << "StepRunner::Run: starts";
  last_capture_s_ = 0;
  // The host half: the batch and the optimizer's scalars into staging
  // memory, once the previous step's upload has read it.
  backend_.WaitStaged();
  for (int64_t r = 0; r < options_.batch; ++r) host_starts_[r] = static_cast<int32_t>(starts[r]);
  optimizer_.Prepare(lr_multiplier, host_scalars_);
  const int variant = optimizer_.UpdateVariant();
  // Every step makes the same arena requests: after the warm-up, asking for
  // more is a bug (and would allocate inside a captured step).
  if (step == kWarmupSteps) arena_.set_growth_allowed(false);
  if (use_graphs_ && step >= kWarmupSteps && eager_variants_.contains(variant)) {
    auto graph = graphs_.find(variant);
    if (graph == graphs_.end()) {
      const Clock::time_point capture_start = Clock::now();
      ASSIGN_OR_RETURN(const int captured, backend_.CaptureGraph([this] { RecordStep(); }));
      graph = graphs_.emplace(variant, captured).first;
      last_capture_s_ = std::chrono::duration<double>(Clock::now() - capture_start).count();
    }
    backend_.LaunchGraph(graph->second);
  } else {
    RecordStep();
    eager_variants_.insert(variant);
  }
  return absl::OkStatus();
}

float StepRunner::ReadLoss() {
  float loss = NAN;
  if (!loss_.empty()) backend_.CopyToHost(&loss, loss_.data, sizeof(float));
  return loss;
}

bool StepRunner::StepsFinite() {
  float health = 0;
  backend_.CopyToHost(&health, health_.data, sizeof(float));
  return health == 0;
}

void StepRunner::Release() {
  if (released_) return;
  released_ = true;
  if (backend_.SupportsGraphs()) backend_.ReleaseGraphs();
  arena_.set_growth_allowed(true);
}

}  // namespace smallem
