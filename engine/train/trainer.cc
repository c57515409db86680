#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/data/dataset.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "engine/train/evaluate.h"
#include "engine/train/schedule.h"

namespace smallem {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

absl::Status WriteJson(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return absl::ResourceExhaustedError(absl::StrCat("writing ", tmp, " failed"));
  }
  std::filesystem::rename(tmp, path);
  return absl::OkStatus();
}

// Model FLOPs per token: 6N for the weights plus 6·L·C·T for attention.
double FlopsPerToken(const ModelConfig& c, int64_t params) {
  return 6.0 * params + 6.0 * c.layers * c.embed * c.context;
}

// SMALLEM_CUDA_GRAPHS=0 turns graphs off whatever the options say.
bool GraphsAllowedByEnvironment() {
  const char* value = std::getenv("SMALLEM_CUDA_GRAPHS");
  return value == nullptr || std::string_view(value) != "0";
}

// What the device needs to run steps with no host work in them: the
// training split (S) i32, and the per-step inputs — the batch's B sequence
// starts (i32) and the optimizer's scalars (f32) — in one device block fed
// from one block of staging memory by a single copy per step.
class StepInputs {
 public:
  static absl::StatusOr<std::unique_ptr<StepInputs>> Create(Backend& backend,
                                                            std::span<const uint16_t> split,
                                                            int64_t batch, int64_t scalars) {
    std::unique_ptr<StepInputs> in(new StepInputs(backend));
    const auto count = static_cast<int64_t>(split.size());
    absl::StatusOr<void*> tokens = backend.Allocate(static_cast<size_t>(count) * sizeof(int32_t));
    if (!tokens.ok()) return tokens.status();
    in->tokens_ = Tensor{.data = *tokens, .shape = {count}, .dtype = DType::kI32};
    // The split as i32, converted a chunk at a time.
    std::vector<int32_t> chunk(static_cast<size_t>(std::min<int64_t>(count, int64_t{1} << 20)));
    for (int64_t begin = 0; begin < count; begin += static_cast<int64_t>(chunk.size())) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(chunk.size()), count - begin);
      std::copy(split.begin() + begin, split.begin() + begin + n, chunk.begin());
      backend.CopyToDevice(in->tokens_.i32() + begin, chunk.data(),
                           static_cast<size_t>(n) * sizeof(int32_t));
    }
    // starts, padded to 64 bytes, then the scalars.
    const int64_t starts_words = (batch + 15) / 16 * 16;
    in->bytes_ = static_cast<size_t>(starts_words + std::max<int64_t>(scalars, 1)) * 4;
    absl::StatusOr<void*> device = backend.Allocate(in->bytes_);
    if (!device.ok()) return device.status();
    in->device_ = *device;
    absl::StatusOr<void*> staging = backend.AllocateStaging(in->bytes_);
    if (!staging.ok()) return staging.status();
    in->staging_ = *staging;
    in->starts_ = Tensor{.data = in->device_, .shape = {batch}, .dtype = DType::kI32};
    in->scalars_ = Tensor{.data = static_cast<int32_t*>(in->device_) + starts_words,
                          .shape = {scalars}};
    in->host_starts_ = static_cast<int32_t*>(in->staging_);
    in->host_scalars_ = reinterpret_cast<float*>(in->host_starts_ + starts_words);
    return in;
  }

  ~StepInputs() {
    if (staging_ != nullptr) backend_.FreeStaging(staging_);
    if (device_ != nullptr) backend_.Free(device_);
    if (tokens_.data != nullptr) backend_.Free(tokens_.data);
  }

  // Staging memory for the next step's values; write only after
  // Backend::WaitStaged.
  int32_t* host_starts() const { return host_starts_; }
  float* host_scalars() const { return host_scalars_; }
  // Enqueues the copy of the staged values to the device (part of a step).
  void Upload() const { backend_.UploadStaged(device_, staging_, bytes_); }

  const Tensor& tokens() const { return tokens_; }    // (S) i32
  const Tensor& starts() const { return starts_; }    // (B) i32
  const Tensor& scalars() const { return scalars_; }  // (K) f32

 private:
  explicit StepInputs(Backend& backend) : backend_(backend) {}

  Backend& backend_;
  Tensor tokens_, starts_, scalars_;
  void* device_ = nullptr;
  void* staging_ = nullptr;
  size_t bytes_ = 0;
  int32_t* host_starts_ = nullptr;
  float* host_scalars_ = nullptr;
};

// Releases the backend's graphs when training ends, early returns included,
// before the memory they replay on (arena, step inputs) is freed.
class GraphRelease {
 public:
  explicit GraphRelease(Backend& backend) : backend_(backend) {}
  ~GraphRelease() { Release(); }
  void Release() {
    if (backend_.SupportsGraphs()) backend_.ReleaseGraphs();
  }

 private:
  Backend& backend_;
};

}  // namespace

absl::StatusOr<nlohmann::json> Train(const RunSpec& spec, Backend& backend,
                                     const TrainOptions& options) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  absl::StatusOr<Dataset> data = Dataset::Open(spec.data);
  if (!data.ok()) return absl::InvalidArgumentError(data.status().message());
  const ModelConfig config = spec.ModelFor(data->vocab());
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  const int64_t B = spec.batch, T = spec.context;
  if (static_cast<int64_t>(data->train.size()) <= T + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.data, ": training split has ", data->train.size(), " tokens, fewer than one sequence of ",
        T + 1));
  }
  if (data->train.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.data, ": training split has ", data->train.size(),
        " tokens; the engine addresses at most 2^31 − 1 (split the corpus)"));
  }
  const int64_t eval_rows = spec.eval_batch_size > 0 ? spec.eval_batch_size : B;
  absl::StatusOr<ValidationPlan> plan =
      PlanValidation(static_cast<int64_t>(data->val.size()), eval_rows, T, spec.eval_batches);
  if (!plan.ok()) return plan.status();
  if (plan->batches < spec.eval_batches && options.on_warning) {
    options.on_warning(absl::StrCat("validation split holds only ", plan->batches, " of the ",
                                    spec.eval_batches, " requested batches; using ",
                                    plan->batches));
  }
  if (!options.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", options.out_dir));
  }

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, backend);
  if (!model.ok()) return model.status();
  (*model)->Initialize(static_cast<uint64_t>(spec.seed));
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  if (!optimizer.ok()) return optimizer.status();

  // The schedule yields a multiplier; each optimizer scales its own rates.
  const Schedule schedule{.lr = 1.0, .warmup = spec.warmup, .min_lr_ratio = spec.min_lr_ratio};
  TrainBatches batches(data->train, B, T, TrainBatchSeed(spec.seed));
  absl::StatusOr<std::unique_ptr<StepInputs>> step_inputs =
      StepInputs::Create(backend, data->train, B, (*optimizer)->ScalarCount());
  if (!step_inputs.ok()) return step_inputs.status();
  const StepInputs& in = **step_inputs;
  Arena arena(backend);
  Tape tape(backend, arena);
  // Declared after what the graphs use, so destroyed (and run) before it.
  GraphRelease graph_release(backend);

  // One step's device work, recorded on the tape from scratch each time it
  // runs (eagerly) or is captured (CaptureGraph may call it twice): the
  // same calls every time, the per-step values coming from the upload.
  Tensor loss_value;  // the step's mean loss (1), same address every step
  auto record_step = [&] {
    arena.Reset();
    tape.Reset();
    in.Upload();
    Tensor inputs = arena.Allocate({B * T}, DType::kI32);
    Tensor targets = arena.Allocate({B * T}, DType::kI32);
    backend.GatherSequences(GatherSequencesParams{
        .tokens = in.tokens(), .starts = in.starts(), .inputs = inputs, .targets = targets,
        .time = T});
    (*model)->ZeroGrad();
    const Var loss = Mean(tape, (*model)->Losses(tape, inputs, targets, B, T));
    tape.Backward(loss);
    (*optimizer)->Update(in.scalars());
    loss_value = tape.value(loss);
  };

  // Graphs replay steps on backends that have them. The profiler
  // (ProfilingBackend, --profile) has none: it synchronizes around every
  // call, so a profiled run is eager. A minutes budget is captured like a
  // steps budget: its learning rate is staged like any other, and running
  // it eagerly would make its steps slower than those of the steps-budget
  // reference runs it is compared with at equal time.
  const bool use_graphs =
      options.cuda_graphs && GraphsAllowedByEnvironment() && backend.SupportsGraphs();
  // Update variants (engine/optim/optimizer.h) seen eagerly, and their graphs.
  std::set<int> eager_variants;
  std::map<int, int> graphs;
  std::vector<int64_t> starts(static_cast<size_t>(B));

  const double budget_s = spec.budget.minutes ? *spec.budget.minutes * 60.0 : 0.0;
  const int64_t budget_steps = spec.budget.steps.value_or(0);
  double train_s = 0;
  int64_t step = 0;
  float last_loss = NAN;
  double last_lr = 0;
  while (true) {
    const double fraction = budget_steps ? static_cast<double>(step) / budget_steps
                                         : train_s / budget_s;
    if (fraction >= 1.0) break;
    if (options.stop && options.stop->load()) return absl::CancelledError("training cancelled");
    const Clock::time_point start = Clock::now();
    double capture_s = 0;
    last_lr = schedule.At(fraction);
    // The host half of the step: the batch and the optimizer's scalars into
    // staging memory, once the previous step's upload has read it.
    backend.WaitStaged();
    batches.NextStarts(starts.data());
    for (int64_t r = 0; r < B; ++r) in.host_starts()[r] = static_cast<int32_t>(starts[r]);
    (*optimizer)->Prepare(static_cast<float>(last_lr), in.host_scalars());
    const int variant = (*optimizer)->UpdateVariant();
    // Every step makes the same arena requests: after the warm-up, asking
    // for more is a bug (and would allocate inside a captured step).
    if (step == kWarmupSteps) arena.set_growth_allowed(false);
    if (use_graphs && step >= kWarmupSteps && eager_variants.contains(variant)) {
      auto graph = graphs.find(variant);
      if (graph == graphs.end()) {
        // Capturing, like compiling, is not training time.
        const Clock::time_point capture_start = Clock::now();
        absl::StatusOr<int> captured = backend.CaptureGraph(record_step);
        if (!captured.ok()) return captured.status();
        graph = graphs.emplace(variant, *captured).first;
        capture_s = Seconds(Clock::now() - capture_start);
      }
      backend.LaunchGraph(graph->second);
    } else {
      record_step();
      eager_variants.insert(variant);
    }
    ++step;
    const bool report = step % options.progress_every == 0 || step == budget_steps;
    if (report || budget_s > 0) {
      // Reading the loss synchronizes; a timed run needs that every step to
      // measure training time exactly.
      if (report) backend.CopyToHost(&last_loss, loss_value.data, sizeof(float));
      else backend.Synchronize();
    }
    train_s += Seconds(Clock::now() - start) - capture_s;
    if (report && options.on_progress) {
      const double tokens_per_s = step * B * T / train_s;
      const int64_t total = budget_steps ? budget_steps
                                         : static_cast<int64_t>(step * budget_s / train_s);
      options.on_progress(TrainProgress{
          .step = step, .total_steps = total, .loss = last_loss, .tokens_per_s = tokens_per_s,
          .elapsed_s = train_s,
          .eta_s = budget_steps ? train_s / step * (budget_steps - step) : budget_s - train_s});
    }
  }
  // The last step's loss, whether or not it was a progress step.
  if (!loss_value.empty()) backend.CopyToHost(&last_loss, loss_value.data, sizeof(float));
  graph_release.Release();
  arena.set_growth_allowed(true);
  if (!std::isfinite(last_loss)) {
    return absl::InternalError(absl::StrCat(
        "training diverged: loss is ", last_loss, " at step ", step, " (lower --lr?)"));
  }

  // "Ends fully decayed": training stops once the fraction of the budget
  // done reaches 1, where the schedule is at its floor lr·min_lr_ratio.
  // final_lr is the schedule's value where training stopped (the floor for
  // every run that reached its budget); the last update used the value where
  // it began, less than one step earlier.
  const double end_fraction =
      budget_steps ? static_cast<double>(step) / budget_steps : train_s / budget_s;
  const double final_lr = schedule.At(end_fraction) * spec.lr;

  const EvalResult eval = Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(), *plan);
  const int64_t params = (*model)->ParameterCount();
  const int64_t tokens = step * B * T;
  const double tokens_per_s = train_s > 0 ? tokens / train_s : 0;
  nlohmann::json mfu = nullptr;
  if (backend.PeakFlops() > 0) mfu = tokens_per_s * FlopsPerToken(config, params) / backend.PeakFlops();
  nlohmann::json spec_json = spec.ToJson();
  nlohmann::json result = {
      {"val_nats_per_byte", eval.nats_per_byte},
      {"val_nats_per_token", eval.nats_per_token},
      {"val_bits_per_byte", eval.bits_per_byte},
      {"eval_batches", eval.batches},
      {"steps", step},
      {"tokens", tokens},
      {"epochs", batches.epochs()},
      {"train_seconds", train_s},
      {"tokens_per_s", tokens_per_s},
      {"mfu", mfu},
      {"params", params},
      {"peak_memory_bytes", backend.PeakMemoryBytes()},
      {"kv_cache_bytes_per_token", 2 * config.layers * config.embed * sizeof(float)},
      {"final_train_loss", last_loss},
      {"final_lr", final_lr},
      {"cuda_graphs", !graphs.empty()},
      {"device", backend.Name()},
      {"device_class", backend.DeviceClass()},
      {"config", spec_json},
      {"model", config.ToJson()},
      {"dataset", data->meta.value("content_hash", "")},
      {"seed", spec.seed}};
  if (!options.out_dir.empty()) {
    const std::filesystem::path dir(options.out_dir);
    if (absl::Status s = SaveWeights(**model, (dir / "weights.safetensors").string()); !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteJson((dir / "result.json").string(), result); !s.ok()) return s;
    // The directory is self-contained: generate finds its tokenizer there.
    std::error_code ec;
    std::filesystem::copy_file(std::filesystem::path(spec.data) / "tokenizer.json",
                               dir / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  return result;
}

}  // namespace smallem
