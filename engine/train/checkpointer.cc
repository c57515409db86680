#include "engine/train/checkpointer.h"

#include <utility>

#include "base/status_macros.h"

namespace smallem {

Checkpointer::Checkpointer(Options options, CheckpointOwner owner, const Model& model,
                           const Optimizer& optimizer, const TrainBatches& batches,
                           const TrainingPosition& start)
    : options_(std::move(options)),
      owner_(std::move(owner)),
      model_(model),
      optimizer_(optimizer),
      batches_(batches),
      last_steps_(start.steps),
      last_seconds_(start.train_seconds) {}

bool Checkpointer::Due(int64_t steps, double train_seconds) const {
  if (options_.path.empty()) return false;
  if (options_.every_steps > 0) return steps - last_steps_ >= options_.every_steps;
  return options_.every_seconds > 0 && train_seconds - last_seconds_ >= options_.every_seconds;
}

bool Checkpointer::DueOnStop(int64_t steps) const {
  const bool on = options_.every_steps > 0 || options_.every_seconds > 0;
  return !options_.path.empty() && on && steps > last_steps_;
}

absl::Status Checkpointer::Write(const TrainingPosition& at) {
  RETURN_IF_ERROR(WriteCheckpoint(
      options_.path, CaptureCheckpoint(owner_, at, model_, optimizer_, batches_)));
  last_steps_ = at.steps;
  last_seconds_ = at.train_seconds;
  if (options_.on_written) {
    options_.on_written(CheckpointWritten{
        .path = options_.path, .steps = at.steps, .train_seconds = at.train_seconds});
  }
  return absl::OkStatus();
}

}  // namespace smallem
