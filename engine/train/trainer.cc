#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "engine/arena.h"
#include "corpus/dataset.h"
#include "engine/model/generation_speed.h"
#include "engine/model/generator.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "engine/train/checkpoint.h"
#include "engine/train/checkpointer.h"
#include "engine/train/evaluate.h"
#include "engine/train/schedule.h"
#include "engine/train/resume.h"
#include "engine/train/step_runner.h"
#include "engine/train/validation_text.h"
#include "nlohmann/json.hpp"
#include "runspec/run_result.h"

namespace smallem {
namespace {

using Clock = std::chrono::steady_clock;

// Tokens a finished run generates to measure generation_tokens_per_s, at
// most: the measure stays inside the context (GenerationTokensMeasured).
constexpr int64_t kMeasuredGenerationTokens = 64;

// The tokens the measure generates after its one-token prompt: 64, or fewer
// so that prompt and tokens fit the context. Past the context, learned
// positions must re-encode the whole window for every token (the generator
// slides only with RoPE), so a measure that crossed it timed T − 1 extra
// positions once: with the demo's context of 64, 64 tokens cost 127 steps
// under learned positions and 64 under RoPE — half the tokens/s for the
// same work per token.
int64_t GenerationTokensMeasured(const ModelConfig& config) {
  return std::max<int64_t>(1, std::min(kMeasuredGenerationTokens, config.context - 1));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Model FLOPs per token: 6N for the weights (N = every parameter, MTP's
// included) plus 6·L·C·T for attention. With passes the blocks' weights and
// L count once per pass; each MTP depth also uses the tied head (V·C) and
// adds one block's attention.
double FlopsPerToken(const ModelConfig& c, int64_t params) {
  const int64_t outside_blocks =
      c.vocab * c.embed +
      (c.architecture.positions == PositionKind::kLearned ? c.context * c.embed : 0) +
      c.MtpParameterCount();
  const double repeated =
      static_cast<double>(c.architecture.passes - 1) * (params - outside_blocks);
  return 6.0 * (params + repeated + c.mtp * c.vocab * c.embed) +
         6.0 * (c.effective_depth() + c.mtp) * c.embed * c.context;
}

// A run's budget: a number of steps, or seconds of training.
struct TrainingBudget {
  int64_t steps = 0;   // 0 for a minutes budget
  double seconds = 0;  // 0 for a steps budget

  // The fraction of the budget done after `step` steps and `train_s`
  // training seconds; training stops when it reaches 1.
  double Fraction(int64_t step, double train_s) const {
    return steps ? static_cast<double>(step) / steps : train_s / seconds;
  }
};

// What a run trains and is evaluated on, checked before anything is
// allocated on the backend.
struct TrainInputs {
  Dataset data;
  ModelConfig config;
  ValidationText text;  // the targets scored, whatever the batch and context
};

// Setup: checks the spec, opens the dataset (any failure is InvalidArgument:
// the run cannot succeed), derives the model's config and plans the
// validation text; creates options.out_dir.
absl::StatusOr<TrainInputs> OpenInputs(const RunSpec& spec, const TrainOptions& options) {
  RETURN_IF_ERROR(spec.Validate());
  absl::StatusOr<Dataset> data = Dataset::Open(spec.data);
  if (!data.ok()) return absl::InvalidArgumentError(data.status().message());
  const ModelConfig config = spec.ModelFor(data->vocab());
  RETURN_IF_ERROR(config.Validate());
  const int64_t T = spec.context;
  if (static_cast<int64_t>(data->train.size()) <= T + 1) {
    return absl::InvalidArgumentError(absl::StrCat(spec.data, ": training split has ",
                                                   data->train.size(),
                                                   " tokens, fewer than one sequence of ", T + 1));
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
  return TrainInputs{.data = *std::move(data), .config = config, .text = *text};
}

// How the step loop ended.
struct StepsDone {
  int64_t steps = 0;
  double train_s = 0;     // training seconds, graph captures excluded
  float last_loss = NAN;  // the last step's training loss
  // A step's loss or gradient norm was not finite: training stopped at the
  // progress step `steps` that found it (the first bad step is at most
  // progress_every steps earlier).
  bool diverged = false;
  float last_finite_loss = NAN;  // the last loss read while every step was finite
};

// Reads the last loss and the runner's divergence flag into `done`: true
// when training may go on.
bool CheckSteps(StepRunner& runner, StepsDone& done) {
  done.last_loss = runner.ReadLoss();
  if (runner.StepsFinite() && std::isfinite(done.last_loss)) {
    done.last_finite_loss = done.last_loss;
    return true;
  }
  done.diverged = true;
  return false;
}

// The step loop: runs steps until the budget is spent or a progress step
// finds the run diverged, reporting progress; then reads the last loss and
// releases the runner's graphs. Cancelled when options.stop is raised.
// Starts from `from` (nothing done, or a checkpoint's position); writes
// checkpoints through `checkpointer` when they are due.
absl::StatusOr<StepsDone> RunSteps(StepRunner& runner, TrainBatches& batches,
                                   const Schedule& schedule, const TrainingBudget& budget,
                                   Backend& backend, int64_t B, int64_t T,
                                   const TrainOptions& options, const StepsDone& from,
                                   Checkpointer& checkpointer, int64_t resumes) {
  std::vector<int64_t> starts(static_cast<size_t>(B));
  StepsDone done = from;
  int64_t& step = done.steps;
  double& train_s = done.train_s;
  while (true) {
    const double fraction = budget.Fraction(step, train_s);
    if (fraction >= 1.0) break;
    if (options.stop && options.stop->load()) {
      // Stopped from outside (the worker is being stopped): what was trained
      // since the last checkpoint is kept, unless it diverged.
      if (checkpointer.DueOnStop(step) && CheckSteps(runner, done)) {
        RETURN_IF_ERROR(checkpointer.Write(TrainingPosition{
            .steps = step, .train_seconds = train_s, .last_loss = done.last_loss,
            .resumes = resumes}));
      }
      return absl::CancelledError("training cancelled");
    }
    const Clock::time_point start = Clock::now();
    const double lr = schedule.At(fraction);
    batches.NextStarts(starts.data());
    // The runner counts its own steps (warm-up, captures) from 0.
    RETURN_IF_ERROR(runner.Run(step - from.steps, starts, static_cast<float>(lr)));
    ++step;
    const bool report = step % options.progress_every == 0 || step == budget.steps;
    bool finite = true;
    if (report || budget.seconds > 0) {
      // Reading the loss synchronizes; a timed run needs that every step to
      // measure training time exactly.
      if (report) finite = CheckSteps(runner, done);
      else backend.Synchronize();
    }
    // Capturing, like compiling, is not training time.
    train_s += Seconds(Clock::now() - start) - runner.last_capture_seconds();
    if (!finite) break;
    if (report && options.on_progress) {
      const double tokens_per_s = step * B * T / train_s;
      const int64_t total = budget.steps ? budget.steps
                                         : static_cast<int64_t>(step * budget.seconds / train_s);
      // One read of the routing statistics (a copy from the device) per
      // progress step; empty for a dense model.
      MoeStats routing = runner.model().RoutingStats();
      options.on_progress(TrainProgress{
          .step = step, .total_steps = total, .loss = done.last_loss,
          .tokens_per_s = tokens_per_s, .elapsed_s = train_s,
          .eta_s = budget.steps ? train_s / step * (budget.steps - step)
                                : budget.seconds - train_s,
          .max_over_mean_load = routing.max_over_mean,
          .tokens_per_expert = std::move(routing.tokens_per_expert)});
    }
    // Between steps, outside the timed region; none after the last step.
    if (checkpointer.Due(step, train_s) && budget.Fraction(step, train_s) < 1.0) {
      // A checkpoint holds only finite state: a diverged run ends here.
      if (!CheckSteps(runner, done)) break;
      RETURN_IF_ERROR(checkpointer.Write(TrainingPosition{
          .steps = step, .train_seconds = train_s, .last_loss = done.last_loss,
          .resumes = resumes}));
    }
  }
  // The last step's loss, whether or not it was a progress step (a run
  // resumed at its end ran none: the checkpoint's).
  if (step > from.steps && !done.diverged) CheckSteps(runner, done);
  runner.Release();
  return done;
}

// What a checkpoint of this run on this backend belongs to.
CheckpointOwner OwnerOf(const RunSpec& spec, const TrainInputs& inputs, const Backend& backend) {
  return CheckpointOwner{.spec_json = CheckpointSpecJson(spec),
                         .dataset_hash = inputs.data.meta.value("content_hash", ""),
                         .device_class = backend.DeviceClass()};
}

// Where a run starts: from nothing, or from options.resume_from.
struct ResumePoint {
  StepsDone done;        // steps, training seconds and loss already behind it
  int64_t resumes = 0;   // including this one
};

// Restores options.resume_from, when set, into the fresh model, optimizer
// and data order. Every failure has kResumeFailedCode (see trainer.h).
absl::StatusOr<ResumePoint> MaybeResume(const RunSpec& spec, const TrainInputs& inputs,
                                        const Backend& backend, const TrainOptions& options,
                                        Model& model, Optimizer& optimizer,
                                        TrainBatches& batches) {
  if (options.resume_from.empty()) return ResumePoint{};
  absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(options.resume_from);
  absl::Status restored = checkpoint.status();
  if (restored.ok()) {
    restored = RestoreCheckpoint(*checkpoint, OwnerOf(spec, inputs, backend), model, optimizer,
                                 batches);
  }
  if (!restored.ok()) {
    return absl::Status(kResumeFailedCode, absl::StrCat("resume from ", options.resume_from,
                                                        ": ", restored.message()));
  }
  return ResumePoint{.done = StepsDone{.steps = checkpoint->steps,
                                       .train_s = checkpoint->train_seconds,
                                       .last_loss = checkpoint->last_loss},
                     .resumes = checkpoint->resumes + 1};
}

// The result of a run that diverged: where it stopped and why, no
// evaluation (its weights are not finite).
DivergedResult DivergedResultOf(const RunSpec& spec, const TrainInputs& inputs,
                                const StepsDone& done, const Backend& backend) {
  return DivergedResult{
      .diverged_step = done.steps,
      .last_finite_loss = std::isfinite(done.last_finite_loss)
                              ? std::optional<double>(done.last_finite_loss)
                              : std::nullopt,
      .steps = done.steps,
      .train_seconds = done.train_s,
      .device = backend.Name(),
      .device_class = backend.DeviceClass(),
      .config = spec.ToJson(),
      .dataset = inputs.data.meta.value("content_hash", ""),
      .seed = spec.seed};
}

// The result (docs/architecture.md § The formats) of a finished run.
RunResult ResultOf(const RunSpec& spec, const TrainInputs& inputs, const StepsDone& done,
                   double final_lr, const EvalResult& eval, const Model& model,
                   const Backend& backend, double epochs, bool graphs_used) {
  const ModelConfig& config = inputs.config;
  // The model that generates: the MTP modules are counted apart. A MoE
  // token uses only its experts: FLOPs and the comparison's parameter check
  // follow the active parameters (runspec/model_config.h).
  const int64_t mtp_params = config.MtpParameterCount();
  const int64_t params = config.ActiveParameterCount() - mtp_params;
  const int64_t tokens = done.steps * spec.batch * spec.context;
  const double tokens_per_s = done.train_s > 0 ? tokens / done.train_s : 0;
  RunResult r;
  r.val_nats_per_byte = eval.nats_per_byte;
  r.val_nats_per_token = eval.nats_per_token;
  r.val_bits_per_byte = eval.bits_per_byte;
  r.eval_batches = eval.batches;
  r.eval_spans = eval.spans;
  r.eval_tokens = eval.tokens;
  // The scored targets: equal fingerprints, equal validation text.
  r.eval_fingerprint =
      ValidationFingerprint(inputs.text, inputs.data.meta.value("content_hash", ""));
  r.steps = done.steps;
  r.tokens = tokens;
  r.epochs = epochs;
  r.train_seconds = done.train_s;
  r.tokens_per_s = tokens_per_s;
  if (backend.PeakFlops() > 0) {
    r.mfu = tokens_per_s * FlopsPerToken(config, config.ActiveParameterCount()) /
            backend.PeakFlops();
  }
  r.params = config.TotalParameterCount() - mtp_params;
  r.active_params = params;
  r.peak_memory_bytes = static_cast<int64_t>(backend.PeakMemoryBytes());
  // The generator's cache, from its layout (engine/model/generator.h).
  r.kv_cache_bytes_per_token = Generator::LayoutFor(config).BytesPerToken();
  r.final_train_loss = done.last_loss;
  r.final_lr = final_lr;
  r.cuda_graphs = graphs_used;
  // What the activations were stored in: bf16 in a GPU's speed mode.
  r.activations = backend.ActivationDType() == DType::kBF16 ? "bf16" : "f32";
  r.device = backend.Name();
  r.device_class = backend.DeviceClass();
  r.config = spec.ToJson();
  r.model = config.ToJson();
  r.dataset = inputs.data.meta.value("content_hash", "");
  r.seed = spec.seed;
  // MoE: the last training step's routing statistics; none if dense.
  if (config.moe.enabled()) {
    const MoeStats routing = model.RoutingStats();
    r.routing = RoutingResult{.tokens_per_expert = routing.tokens_per_expert,
                              .max_over_mean_load = routing.max_over_mean};
  }
  if (config.mtp > 0) {
    // Each MTP depth's validation loss, depth d at d − 1 (engine/model/mtp.h);
    // the val_* fields above stay next-token.
    r.val_mtp_nats_per_token = eval.mtp_nats_per_token;
    r.mtp_params = mtp_params;
  }
  return r;
}

// Writes the run's directory: weights, result.json and the dataset's
// tokenizer, so the directory is self-contained (generate finds its
// tokenizer there).
absl::Status WriteRunDirectory(const std::string& out_dir, const Model& model,
                               const nlohmann::json& result, const std::string& data_dir) {
  const std::filesystem::path dir(out_dir);
  RETURN_IF_ERROR(SaveWeights(model, (dir / "weights.safetensors").string()));
  RETURN_IF_ERROR(WriteFileDurably((dir / "result.json").string(), result.dump(2) + "\n"));
  ASSIGN_OR_RETURN(const std::string tokenizer,
                   ReadFile((std::filesystem::path(data_dir) / "tokenizer.json").string()));
  return WriteFileDurably((dir / "tokenizer.json").string(), tokenizer);
}

}  // namespace

bool IsResumeFailure(const absl::Status& status) {
  return status.code() == kResumeFailedCode && absl::StartsWith(status.message(), "resume from ");
}

absl::StatusOr<nlohmann::json> Train(const RunSpec& spec, Backend& backend,
                                     const TrainOptions& options) {
  ASSIGN_OR_RETURN(const TrainInputs inputs, OpenInputs(spec, options));
  const int64_t B = spec.batch, T = spec.context;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(inputs.config, backend));
  model->Initialize(static_cast<uint64_t>(spec.seed));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(spec, *model));

  // The schedule yields a multiplier; each optimizer scales its own rates.
  const Schedule schedule{.lr = 1.0, .warmup = spec.warmup, .min_lr_ratio = spec.min_lr_ratio};
  const TrainingBudget budget{.steps = spec.budget.steps.value_or(0),
                      .seconds = spec.budget.minutes ? *spec.budget.minutes * 60.0 : 0.0};
  TrainBatches batches(inputs.data.train, B, T, TrainBatchSeed(spec.seed));
  Arena arena(backend);
  Tape tape(backend, arena);
  // Graphs replay steps on backends that have them. The profiler
  // (ProfilingBackend, --profile) has none: it synchronizes around every
  // call, so a profiled run is eager. A minutes budget is captured like a
  // steps budget: its learning rate is staged like any other, and running
  // it eagerly would make its steps slower than those of the steps-budget
  // reference runs it is compared with at equal time.
  // Declared after the arena and tape it uses, so destroyed (and its graphs
  // released) before them.
  ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> runner,
                   StepRunner::Create(*model, *optimizer, arena, tape, inputs.data.train,
                                      StepRunner::Options{.batch = B, .time = T,
                                                          .graphs = options.cuda_graphs}));
  ASSIGN_OR_RETURN(const ResumePoint resume,
                   MaybeResume(spec, inputs, backend, options, *model, *optimizer, batches));
  Checkpointer checkpointer(
      Checkpointer::Options{.path = options.checkpoint_path,
                            .every_seconds = spec.checkpoint_minutes * 60.0,
                            .every_steps = options.checkpoint_every_steps,
                            .on_written = options.on_checkpoint},
      OwnerOf(spec, inputs, backend), *model, *optimizer, batches,
      TrainingPosition{.steps = resume.done.steps, .train_seconds = resume.done.train_s});
  ASSIGN_OR_RETURN(const StepsDone done,
                   RunSteps(*runner, batches, schedule, budget, backend, B, T, options,
                            resume.done, checkpointer, resume.resumes));
  if (done.diverged) {
    // An outcome, not an error: the run ends here, with no weights.
    nlohmann::json result = DivergedResultOf(spec, inputs, done, backend).ToJson();
    if (!options.out_dir.empty()) {
      RETURN_IF_ERROR(WriteFileDurably(
          (std::filesystem::path(options.out_dir) / "result.json").string(),
          result.dump(2) + "\n"));
    }
    return result;
  }

  // "Ends fully decayed": training stops once the fraction of the budget
  // done reaches 1, where the schedule is at its floor lr·min_lr_ratio.
  // final_lr is the schedule's value where training stopped (the floor for
  // every run that reached its budget); the last update used the value where
  // it began, less than one step earlier.
  const double final_lr = schedule.At(budget.Fraction(done.steps, done.train_s)) * spec.lr;
  const EvalResult eval = Evaluate(*model, arena, inputs.data.val,
                                   inputs.data.tokenizer.token_bytes(), inputs.text,
                                   spec.eval_batch_size);
  RunResult r = ResultOf(spec, inputs, done, final_lr, eval, *model, backend, batches.epochs(),
                         runner->graphs_used());
  r.resumes = resume.resumes;
  // Generation with the cache, greedy, batch 1, on the host (a second or so
  // for the reference model): what the cache layout costs at inference.
  const int64_t generated = GenerationTokensMeasured(inputs.config);
  r.generation_tokens = generated;
  r.generation_tokens_per_s = MeasureGreedyGeneration(*model, generated).tokens_per_s();
  const nlohmann::json result = r.ToJson();
  if (!options.out_dir.empty()) {
    RETURN_IF_ERROR(WriteRunDirectory(options.out_dir, *model, result, spec.data));
  }
  return result;
}

bool CudaGraphsFromEnvironment() {
  const char* value = std::getenv("SMALLEM_CUDA_GRAPHS");
  return value == nullptr || std::string_view(value) != "0";
}

}  // namespace smallem
