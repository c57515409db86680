#include "engine/optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "engine/optim/adamw.h"
#include "engine/optim/muon.h"
#include "engine/profiler.h"
#include "runspec/optimizer_spec.h"
#include "runspec/run_spec.h"

namespace smallem {

Optimizer::~Optimizer() {
  if (device_scalars_ != nullptr) backend_.Free(device_scalars_);
}

void Optimizer::Step(float lr_scale) {
  const int64_t count = ScalarCount();
  if (device_scalars_ == nullptr) {
    absl::StatusOr<void*> buffer = backend_.Allocate(static_cast<size_t>(count) * sizeof(float));
    CHECK(buffer.ok()) << "optimizer scalars: " << buffer.status().message();
    device_scalars_ = *buffer;
    host_scalars_.resize(static_cast<size_t>(count));
  }
  const Tensor scalars{.data = device_scalars_, .shape = {count}};
  Prepare(lr_scale, host_scalars_.data());
  backend_.CopyToDevice(scalars.data, host_scalars_.data(), scalars.bytes());
  Update(scalars);
}

namespace {

// AdamW behind the Optimizer interface: lr = spec.lr · lr_scale.
class AdamWAdapter final : public Optimizer {
 public:
  AdamWAdapter(Backend& backend, std::unique_ptr<AdamWOptimizer> adamw, float lr)
      : Optimizer(backend), adamw_(std::move(adamw)), lr_(lr) {}
  int64_t ScalarCount() const override { return AdamWOptimizer::kScalarCount; }
  void Prepare(float lr_scale, float* scalars) override {
    adamw_->Prepare(lr_ * lr_scale, scalars);
  }
  void Update(const Tensor& scalars) override { adamw_->Update(scalars); }
  Tensor GradNormSquared() const override { return adamw_->ComputedGradNormSquared(); }
  std::vector<StateTensor> StateTensors() const override {
    return adamw_->StateTensors("adamw.");
  }
  int64_t Steps() const override { return adamw_->steps(); }
  void RestoreSteps(int64_t steps) override { adamw_->RestoreSteps(steps); }

 private:
  std::unique_ptr<AdamWOptimizer> adamw_;
  float lr_;
};

// Marks each update of `inner` on the profiler (engine/profiler.h).
class ProfiledOptimizer final : public Optimizer {
 public:
  ProfiledOptimizer(std::unique_ptr<Optimizer> inner, ProfilingBackend& profiler)
      : Optimizer(profiler), inner_(std::move(inner)), profiler_(profiler) {
    profiler_.BeginSteps();
  }
  int64_t ScalarCount() const override { return inner_->ScalarCount(); }
  void Prepare(float lr_scale, float* scalars) override { inner_->Prepare(lr_scale, scalars); }
  void Update(const Tensor& scalars) override {
    profiler_.BeginOptimizer();
    inner_->Update(scalars);
    profiler_.EndOptimizer();
  }
  int UpdateVariant() const override { return inner_->UpdateVariant(); }
  Tensor GradNormSquared() const override { return inner_->GradNormSquared(); }
  std::vector<StateTensor> StateTensors() const override { return inner_->StateTensors(); }
  int64_t Steps() const override { return inner_->Steps(); }
  void RestoreSteps(int64_t steps) override { inner_->RestoreSteps(steps); }

 private:
  std::unique_ptr<Optimizer> inner_;
  ProfilingBackend& profiler_;
};

absl::StatusOr<std::unique_ptr<Optimizer>> CreateUnprofiled(const RunSpec& spec, Model& model) {
  ASSIGN_OR_RETURN(const OptimizerSpec parsed, ParseOptimizerSpec(spec.optimizer));
  const AdamWOptions adamw{.beta1 = static_cast<float>(spec.beta1),
                           .beta2 = static_cast<float>(spec.beta2),
                           .weight_decay = static_cast<float>(spec.weight_decay),
                           .max_grad_norm = static_cast<float>(spec.grad_clip)};
  if (parsed.kind == OptimizerSpec::Kind::kAdamW) {
    ASSIGN_OR_RETURN(std::unique_ptr<AdamWOptimizer> created,
                     AdamWOptimizer::Create(model, adamw));
    return std::make_unique<AdamWAdapter>(model.backend(), std::move(created),
                                          static_cast<float>(spec.lr));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<MuonOptimizer> muon,
      MuonOptimizer::Create(
          model, MuonOptions{.spec = parsed, .weight_decay = static_cast<float>(spec.weight_decay)},
          adamw, static_cast<float>(spec.MuonLr()), static_cast<float>(spec.lr)));
  return std::unique_ptr<Optimizer>(std::move(muon));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const RunSpec& spec, Model& model) {
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateUnprofiled(spec, model));
  if (auto* profiler = dynamic_cast<ProfilingBackend*>(&model.backend())) {
    return std::unique_ptr<Optimizer>(
        std::make_unique<ProfiledOptimizer>(std::move(optimizer), *profiler));
  }
  return optimizer;
}

}  // namespace smallem
