// Checkpoint: the whole state of a training run between two steps, so that a
// run killed mid-way resumes where its last checkpoint left it and ends, on
// the CPU backend with the same thread count, with bit for bit the weights
// and result of an uninterrupted run (docs/reliability.md).
//
// It holds the weights, the optimizer's state (its step count and tensors:
// AdamW's moments, Muon's momenta, NorMuon's statistics —
// Optimizer::StateTensors), the steps done, the training seconds spent, the
// last training loss, the data order's position and its generator's state
// (TrainBatches::State; the schedule's position follows from the steps or
// seconds done and the budget), the number of resumes so far, and what it
// belongs to: the canonical run spec, the dataset's content hash and the
// device class it was trained on.
//
// File format, version 1 (docs/architecture.md § The formats), little-endian:
//   bytes 0–7    "SMLMCKPT"
//   bytes 8–11   u32 format version (1)
//   bytes 12–19  u64 H, the header's length
//   H bytes      header JSON: the scalars above and a table of tensors,
//                {"name", "dtype" ("f32" or "i64"), "count", "offset"}, the
//                offset counted from the end of the header
//   the tensors' bytes, in table order
//   32 bytes     SHA-256 of everything before them
// WriteCheckpoint writes it durably and atomically (base/files.h): a reader
// finds the previous checkpoint or this one, never a torn file.
//
// Plain values and free functions; thread-compatible.
#ifndef SMALLEM_ENGINE_TRAIN_CHECKPOINT_H_
#define SMALLEM_ENGINE_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/train/batches.h"

namespace smallem {

inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  // What the state belongs to; a resume refuses another run's checkpoint.
  std::string spec_json;     // RunSpec::ToJson() without "data" and "checkpoint_minutes"
  std::string dataset_hash;  // the dataset's content hash
  std::string device_class;  // Backend::DeviceClass() of the device that trained it
  // Where training stood.
  int64_t steps = 0;          // optimizer steps done
  double train_seconds = 0;   // training seconds spent (graph captures excluded)
  float last_loss = 0;        // the last step's training loss, nats/token
  int64_t resumes = 0;        // how many times the run had resumed when this was written
  int64_t optimizer_steps = 0;  // Optimizer::Steps()
  TrainBatches::State data;
  // Every tensor by name: "param.<parameter name>" for the weights,
  // "optim.<state tensor name>" for the optimizer's.
  struct F32 {
    std::string name;
    std::vector<float> values;
  };
  std::vector<F32> tensors;
};

// Writes `checkpoint` to `path` (format above). Errors from base/files.h
// name the path.
absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// Reads and checks a checkpoint file: NotFound when absent; DataLoss naming
// the path when it is not a checkpoint, is truncated, fails its SHA-256 or
// its header does not describe its contents; FailedPrecondition for a
// version this build does not read.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_CHECKPOINT_H_
