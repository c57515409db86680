// AdamW over the parameters of a Model (every one, or those a filter keeps):
// f32 moments in one buffer laid out like the kept parameters, decoupled
// weight decay on matrices and embeddings only, clipping by the global
// gradient norm of the whole model computed on the device (no host sync).
// The learning rate and bias corrections are read on the device too
// (AdamWParams::scalars), so a captured step replays with new values.
#ifndef SMALLEM_ENGINE_OPTIM_ADAMW_H_
#define SMALLEM_ENGINE_OPTIM_ADAMW_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"

namespace smallem {

struct AdamWOptions {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;
  float max_grad_norm = 1.0f;  // 0 disables clipping
  // The parameters this optimizer updates (Muon keeps the hidden matrices
  // for itself); empty means every parameter.
  std::function<bool(const Model::Parameter&)> include;
};

class AdamWOptimizer {
 public:
  static absl::StatusOr<std::unique_ptr<AdamWOptimizer>> Create(Model& model,
                                                                 const AdamWOptions& options);
  ~AdamWOptimizer();

  // Scalars a step reads on the device: one AdamWStepScalars.
  static constexpr int64_t kScalarCount = AdamWStepScalars::kCount;
  // The host half of one update with learning rate `lr`: counts the step
  // and writes its AdamWStepScalars into scalars[0, kScalarCount).
  void Prepare(float lr, float* scalars);
  // The device half, reading the scalars from `scalars` (device, (3) f32):
  // the global gradient norm, then one fused AdamW call per parameter.
  void Update(const Tensor& scalars);
  // Both, through a device buffer of its own.
  void Step(float lr);
  int64_t steps() const { return step_; }
  // For checkpoints (Optimizer::StateTensors): the moments, named
  // `prefix`m and `prefix`v; and the step count a resume continues from.
  std::vector<Optimizer::StateTensor> StateTensors(const std::string& prefix) const {
    return {{prefix + "m", m_}, {prefix + "v", v_}};
  }
  void RestoreSteps(int64_t steps) { step_ = steps; }
  // Device scalar: the squared global gradient norm of the last Step.
  Tensor grad_norm_sq() const { return norm_sq_; }
  // That norm where Update computes it (to clip), else an empty tensor.
  Tensor ComputedGradNormSquared() const {
    return options_.max_grad_norm > 0 ? norm_sq_ : Tensor{};
  }

 private:
  AdamWOptimizer(Model& model, const AdamWOptions& options) : model_(model), options_(options) {}

  struct Slot {
    size_t parameter;  // index in model_.parameters()
    int64_t offset;    // of its moments in m_ and v_
  };

  Model& model_;
  AdamWOptions options_;
  std::vector<Slot> slots_;
  void* buffer_ = nullptr;  // m, v, then the norm scalar and Step's scalars
  Tensor m_, v_, norm_sq_, own_scalars_;
  int64_t step_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OPTIM_ADAMW_H_
