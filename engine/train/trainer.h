// Train: one complete training run — build the model for a RunSpec, train it
// to its budget, evaluate it on the fixed validation text, write its
// weights and result JSON.
//
// Error classes (what the coordinator's retry policy reads):
//   InvalidArgument  — the spec or dataset is unusable; retrying cannot help.
//   ResourceExhausted — out of memory; not retried either.
//   Cancelled        — `stop` was raised.
//   anything else    — an engine error.
#ifndef SMALLEM_ENGINE_TRAIN_TRAINER_H_
#define SMALLEM_ENGINE_TRAIN_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/train/checkpointer.h"
#include "engine/train/step_runner.h"  // kWarmupSteps
#include "nlohmann/json_fwd.hpp"
#include "runspec/run_spec.h"

namespace smallem {

struct TrainProgress {
  int64_t step = 0;          // optimizer steps done
  int64_t total_steps = 0;   // of a steps budget; estimated for minutes
  double loss = 0;           // training loss of the last step, nats/token
  double tokens_per_s = 0;   // training throughput so far
  double elapsed_s = 0;      // training seconds so far
  double eta_s = 0;          // estimated training seconds left
  // Mixture of experts, the last step's routing (MoeStats, read from the
  // device at progress steps only): max/mean tokens per expert of the worst
  // layer (1 = even; 0 for a dense model), and the tokens each expert
  // received, summed over the MoE layers (empty for a dense model).
  double max_over_mean_load = 0;
  std::vector<double> tokens_per_expert;
};

struct TrainOptions {
  std::string out_dir;               // weights.safetensors + result.json; "" = none
  int64_t progress_every = 10;       // steps between on_progress calls
  std::function<void(const TrainProgress&)> on_progress;
  std::function<void(const std::string&)> on_warning;  // e.g. fewer eval batches
  // Raised → Cancelled at the next step, after one more checkpoint when a
  // checkpoint path is set and steps were trained since the last.
  const std::atomic<bool>* stop = nullptr;
  // Replay training steps from captured graphs on backends that have them
  // (CUDA), after warm-up steps; false runs every step eagerly (for
  // debugging: same numbers). The binaries set it from the environment
  // (CudaGraphsFromEnvironment).
  bool cuda_graphs = true;
  // Checkpoints (engine/train/checkpoint.h, docs/reliability.md). With a
  // path, the run's state is written there every spec.checkpoint_minutes of
  // training (none when 0) — or every checkpoint_every_steps steps when
  // that is > 0 — but never after the last step, and on_checkpoint is told
  // after each write. A checkpoint that cannot be written fails the run.
  std::string checkpoint_path;
  int64_t checkpoint_every_steps = 0;
  std::function<void(const CheckpointWritten&)> on_checkpoint;
  // A checkpoint of this run to continue from ("" = from the start): its
  // steps, training seconds, data order and state are restored and the
  // result's `resumes` is one more than the checkpoint's.
  std::string resume_from;
};

// False where SMALLEM_CUDA_GRAPHS=0: read by the binaries at start-up into
// TrainOptions::cuda_graphs; nothing inside the engine reads the environment.
bool CudaGraphsFromEnvironment();

// The status code of every failure to resume from TrainOptions::resume_from
// (unreadable, damaged, another run's or device class's checkpoint); its
// message starts "resume from <path>: ". Nothing has been trained then: the
// caller may start the run afresh.
inline constexpr absl::StatusCode kResumeFailedCode = absl::StatusCode::kDataLoss;
bool IsResumeFailure(const absl::Status& status);

// Runs the whole job on `backend`. Returns the result JSON, a RunResult's
// (runspec/run_result.h; docs/architecture.md § Formats: val_nats_per_byte,
// ..., config, seed; `eval_fingerprint`, the scored validation targets
// (docs/validation.md); `cuda_graphs`: whether steps were replayed from
// graphs; `resumes`: how many times it resumed from a checkpoint), also
// written to out_dir/result.json when out_dir is set.
//
// Steps run through a StepRunner (engine/train/step_runner.h): a step does
// no host work beyond choosing it: the training split lives on the device
// (as i32), and each step the host writes only the batch's B sequence starts
// and the optimizer's scalars into staging memory; the step uploads them
// with one copy and gathers its inputs and targets on the device. On a
// backend with graphs the whole step (upload, gather, forward, backward,
// clipping, update) is captured after kWarmupSteps eager steps and replayed
// with one launch; the loss is read back only on progress steps.
//
// Divergence is an outcome, not an error: every step checks on the device
// that its loss and gradient norm are finite (StepRunner::StepsFinite), and
// the first progress step that finds one that was not ends training there.
// The result is then a DivergedResult's JSON (runspec/run_result.h: the step
// it stopped at, the last finite progress loss, steps, seconds, device,
// config, dataset, seed), written to out_dir/result.json with no weights
// and no evaluation.
absl::StatusOr<nlohmann::json> Train(const RunSpec& spec, Backend& backend,
                                     const TrainOptions& options);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_TRAINER_H_
