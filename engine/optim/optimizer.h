// Optimizer: updates a Model's parameters from the gradients in it. One
// implementation per spec family (engine/optim/adamw.h, …); CreateOptimizer
// parses a run spec's optimizer string with errors that list the choices.
//
// A step has a host half and a device half, so that the device half can be
// captured once in a CUDA graph and replayed (engine/train/trainer.cc):
//   Prepare(lr_scale, scalars) — host only: advances the step count and
//     writes the step's scalars (learning rates, bias corrections, Muon's
//     step factors) into `scalars`, ScalarCount() floats of host memory that
//     the caller uploads to device memory;
//   Update(scalars) — enqueues the update, whose kernels read those scalars
//     from device memory rather than from their arguments. Two steps of the
//     same UpdateVariant() enqueue exactly the same calls with the same
//     arguments.
// Step(lr_scale) does both, for callers without a staging buffer.
// Not thread-safe.
#ifndef SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_
#define SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model.h"

namespace smallem {

struct RunSpec;

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // f32 scalars a step reads on the device.
  virtual int64_t ScalarCount() const = 0;
  // The host half of one update; `lr_scale` is the schedule's multiplier in
  // [0, 1] applied to every learning rate the optimizer holds. `scalars`
  // holds ScalarCount() floats.
  virtual void Prepare(float lr_scale, float* scalars) = 0;
  // The device half of the update Prepare announced. `scalars`: device
  // memory, (ScalarCount()) f32, holding what Prepare wrote by the time the
  // update runs.
  virtual void Update(const Tensor& scalars) = 0;
  // Which sequence of calls the prepared update makes: equal variants, equal
  // calls (0 always, except Muon's `period=K`: orthogonalizing or not).
  virtual int UpdateVariant() const { return 0; }
  // The squared global gradient norm the last Update computed on the device
  // (to clip), or an empty tensor where it computes none: the step's health
  // check reads it instead of summing the gradients again.
  virtual Tensor GradNormSquared() const { return Tensor{}; }

  // Prepare, copy the scalars to the device, Update. The first call
  // allocates a small device buffer for the scalars.
  void Step(float lr_scale);

  // Checkpoints (engine/train/checkpoint.h): the optimizer's whole state
  // between two steps is its step count and the device tensors listed here
  // (AdamW's moments, Muon's momenta and NorMuon's statistics), each named
  // uniquely and in a fixed order. The tensors are views owned by the
  // optimizer: a checkpoint copies them out, a resume copies values of the
  // same names and sizes back in before the next Prepare.
  struct StateTensor {
    std::string name;  // e.g. "adamw.m", "muon.stack0.momentum"
    Tensor tensor;     // f32, device
  };
  virtual std::vector<StateTensor> StateTensors() const = 0;
  // Updates prepared so far; RestoreSteps sets it when resuming, so the
  // bias corrections and Muon's period continue where they were.
  virtual int64_t Steps() const = 0;
  virtual void RestoreSteps(int64_t steps) = 0;

 protected:
  explicit Optimizer(Backend& backend) : backend_(backend) {}
  Backend& backend() const { return backend_; }

 private:
  Backend& backend_;
  std::vector<float> host_scalars_;
  void* device_scalars_ = nullptr;
};

// The optimizer `spec.optimizer` names (runspec/optimizer_spec.h), with
// the spec's hyper-parameters: AdamW at spec.lr, or Muon at spec.MuonLr()
// (muon_lr, by default lr) on the hidden matrices with AdamW at spec.lr on
// the rest. When the model's
// backend is a ProfilingBackend (engine/profiler.h) each update is marked on
// it.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const RunSpec& spec, Model& model);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_
