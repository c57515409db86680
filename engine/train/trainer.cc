#include "engine/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/arena.h"
#include "engine/data/dataset.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "engine/train/evaluate.h"
#include "engine/train/schedule.h"
#include "engine/train/step_runner.h"
#include "engine/train/validation_text.h"

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
  absl::StatusOr<ValidationText> text =
      PlanValidationText(static_cast<int64_t>(data->val.size()), spec.eval_batches);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.data, ": ", text.status().message()));
  }
  if (text->spans < spec.eval_batches * kValidationSpansPerBatch && options.on_warning) {
    options.on_warning(absl::StrCat("validation split holds only ", text->spans, " of the ",
                                    spec.eval_batches * kValidationSpansPerBatch,
                                    " requested spans (", spec.eval_batches,
                                    " batches); using ", text->spans));
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
  Arena arena(backend);
  Tape tape(backend, arena);
  // Graphs replay steps on backends that have them. The profiler
  // (ProfilingBackend, --profile) has none: it synchronizes around every
  // call, so a profiled run is eager. A minutes budget is captured like a
  // steps budget: its learning rate is staged like any other, and running
  // it eagerly would make its steps slower than those of the steps-budget
  // reference runs it is compared with at equal time.
  const bool use_graphs = options.cuda_graphs && GraphsAllowedByEnvironment();
  // Declared after the arena and tape it uses, so destroyed (and its graphs
  // released) before them.
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::Create(
      **model, **optimizer, arena, tape, data->train,
      StepRunner::Options{.batch = B, .time = T, .graphs = use_graphs});
  if (!runner.ok()) return runner.status();
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
    last_lr = schedule.At(fraction);
    batches.NextStarts(starts.data());
    if (absl::Status s = (*runner)->Run(step, starts, static_cast<float>(last_lr)); !s.ok()) {
      return s;
    }
    ++step;
    const bool report = step % options.progress_every == 0 || step == budget_steps;
    if (report || budget_s > 0) {
      // Reading the loss synchronizes; a timed run needs that every step to
      // measure training time exactly.
      if (report) last_loss = (*runner)->ReadLoss();
      else backend.Synchronize();
    }
    // Capturing, like compiling, is not training time.
    train_s += Seconds(Clock::now() - start) - (*runner)->last_capture_seconds();
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
  if (step > 0) last_loss = (*runner)->ReadLoss();
  (*runner)->Release();
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

  const EvalResult eval = Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(), *text,
                                   spec.eval_batch_size);
  const std::string dataset_hash = data->meta.value("content_hash", "");
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
      {"eval_spans", eval.spans},
      {"eval_tokens", eval.tokens},
      // The scored targets: equal fingerprints, equal validation text.
      {"eval_fingerprint", ValidationFingerprint(*text, dataset_hash)},
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
      {"cuda_graphs", (*runner)->graphs_used()},
      // What the activations were stored in: bf16 in a GPU's speed mode.
      {"activations", backend.ActivationDType() == DType::kBF16 ? "bf16" : "f32"},
      {"device", backend.Name()},
      {"device_class", backend.DeviceClass()},
      {"config", spec_json},
      {"model", config.ToJson()},
      {"dataset", dataset_hash},
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
