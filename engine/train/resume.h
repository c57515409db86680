// Taking a training run's state into a Checkpoint (engine/train/checkpoint.h)
// and putting it back: the bridge between the trainer's live objects — the
// model's parameters, the optimizer's state, the data order — and the plain
// values a checkpoint file holds.
//
// Both copy between device and host and so synchronize with the backend;
// call them between steps, never while a step is enqueued and unread.
// Not thread-safe (one backend, one caller).
#ifndef SMALLEM_ENGINE_TRAIN_RESUME_H_
#define SMALLEM_ENGINE_TRAIN_RESUME_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/batches.h"
#include "engine/train/checkpoint.h"
#include "nlohmann/json_fwd.hpp"
#include "runspec/run_spec.h"

namespace smallem {

// What a checkpoint belongs to: a run spec on a dataset, trained on a class
// of device.
struct CheckpointOwner {
  std::string spec_json;     // CheckpointSpecJson(spec)
  std::string dataset_hash;  // the dataset's content hash
  std::string device_class;  // Backend::DeviceClass()
};

// The spec as a checkpoint records it: the canonical JSON without "data"
// (a local path that differs between workers) and "checkpoint_minutes"
// (how often state is saved changes nothing that is computed).
std::string CheckpointSpecJson(const RunSpec& spec);

// Where training stood when the state was taken.
struct TrainingPosition {
  int64_t steps = 0;
  double train_seconds = 0;
  float last_loss = 0;
  int64_t resumes = 0;
};

// Copies the whole state into a Checkpoint.
Checkpoint CaptureCheckpoint(const CheckpointOwner& owner, const TrainingPosition& position,
                             const Model& model, const Optimizer& optimizer,
                             const TrainBatches& batches);

// Puts a checkpoint's state into freshly created objects of the same run.
// FailedPrecondition when it belongs to another spec, dataset or device
// class (saying which); DataLoss when its tensors do not match the model's
// parameters or the optimizer's state (a name missing, a size that
// differs); the data order's errors from TrainBatches::Restore. On error
// the objects may be partly overwritten: start them afresh.
absl::Status RestoreCheckpoint(const Checkpoint& checkpoint, const CheckpointOwner& owner,
                               Model& model, Optimizer& optimizer, TrainBatches& batches);

// A result JSON (engine/train/trainer.h) without the keys that timing
// decides (seconds, rates, MFU) and the resume count: what a resumed run
// must match of the uninterrupted run, key for key and bit for bit.
nlohmann::json DeterministicResult(nlohmann::json result);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_RESUME_H_
