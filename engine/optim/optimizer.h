// Optimizer: updates a Model's parameters from the gradients in it. One
// implementation per spec family (engine/optim/adamw.h, …); CreateOptimizer
// parses a run spec's optimizer string with errors that list the choices.
#ifndef SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_
#define SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model.h"

namespace smallem {

struct RunSpec;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update; `lr_scale` is the schedule's multiplier in [0, 1] applied to
  // every learning rate the optimizer holds.
  virtual void Step(float lr_scale) = 0;
};

// The optimizer `spec.optimizer` names (engine/optim/optimizer_spec.h), with
// the spec's hyper-parameters: AdamW at spec.lr, or Muon at spec.muon_lr on
// the hidden matrices with AdamW at spec.lr on the rest. When the model's
// backend is a ProfilingBackend (engine/profiler.h) each step is marked on it.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const RunSpec& spec, Model& model);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OPTIM_OPTIMIZER_H_
