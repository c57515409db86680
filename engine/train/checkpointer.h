// Checkpointer: when and where the trainer writes its checkpoints — every
// `every_seconds` of training time, or every `every_steps` steps when that
// is set (tests and benchmarks want a checkpoint at a known step) — and whom
// it tells (Train's on_checkpoint; the worker's child prints a line the
// daemon uploads from).
//
// The interval counts from the start of training or from the checkpoint a
// run resumed from. A run stopped before its end (Train's options.stop)
// writes one more, so a preempted run loses no step it trained. Writing is not training time: the trainer calls Write
// between steps, outside its timed region.
// Not thread-safe; the referenced objects must outlive it.
#ifndef SMALLEM_ENGINE_TRAIN_CHECKPOINTER_H_
#define SMALLEM_ENGINE_TRAIN_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/train/resume.h"

namespace smallem {

// What on_written is told after each checkpoint.
struct CheckpointWritten {
  std::string path;
  int64_t steps = 0;           // optimizer steps the checkpoint holds
  double train_seconds = 0;    // training seconds it holds
};

class Checkpointer {
 public:
  struct Options {
    std::string path;           // where each checkpoint replaces the last
    double every_seconds = 0;   // of training; 0 = only by steps
    int64_t every_steps = 0;    // > 0: by steps instead of by time
    std::function<void(const CheckpointWritten&)> on_written;
  };

  // `start`: where training starts (step 0, or the checkpoint resumed from).
  Checkpointer(Options options, CheckpointOwner owner, const Model& model,
               const Optimizer& optimizer, const TrainBatches& batches,
               const TrainingPosition& start);

  // Whether a checkpoint is due after `steps` steps and `train_seconds`.
  bool Due(int64_t steps, double train_seconds) const;
  // Whether training stopped early (a SIGTERM) after `steps` steps should
  // write one more: checkpoints are on and steps were trained since the last.
  bool DueOnStop(int64_t steps) const;
  // Captures the state at `at` and writes it (engine/train/checkpoint.h),
  // then tells on_written. Errors from WriteCheckpoint (a full disk).
  absl::Status Write(const TrainingPosition& at);

 private:
  Options options_;
  CheckpointOwner owner_;
  const Model& model_;
  const Optimizer& optimizer_;
  const TrainBatches& batches_;
  int64_t last_steps_ = 0;      // of the last checkpoint (or the start)
  double last_seconds_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_CHECKPOINTER_H_
