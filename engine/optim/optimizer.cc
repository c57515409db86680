#include "engine/optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "engine/optim/adamw.h"
#include "engine/optim/muon.h"
#include "engine/optim/optimizer_spec.h"
#include "engine/profiler.h"
#include "engine/train/run_spec.h"

namespace smallem {
namespace {

// AdamW behind the Optimizer interface: lr = spec.lr · lr_scale.
class AdamWAdapter final : public Optimizer {
 public:
  AdamWAdapter(std::unique_ptr<AdamWOptimizer> adamw, float lr)
      : adamw_(std::move(adamw)), lr_(lr) {}
  void Step(float lr_scale) override { adamw_->Step(lr_ * lr_scale); }

 private:
  std::unique_ptr<AdamWOptimizer> adamw_;
  float lr_;
};

// Marks each step of `inner` on the profiler (engine/profiler.h).
class ProfiledOptimizer final : public Optimizer {
 public:
  ProfiledOptimizer(std::unique_ptr<Optimizer> inner, ProfilingBackend& profiler)
      : inner_(std::move(inner)), profiler_(profiler) {
    profiler_.BeginSteps();
  }
  void Step(float lr_scale) override {
    profiler_.BeginOptimizer();
    inner_->Step(lr_scale);
    profiler_.EndOptimizer();
  }

 private:
  std::unique_ptr<Optimizer> inner_;
  ProfilingBackend& profiler_;
};

absl::StatusOr<std::unique_ptr<Optimizer>> CreateUnprofiled(const RunSpec& spec, Model& model) {
  absl::StatusOr<OptimizerSpec> parsed = ParseOptimizerSpec(spec.optimizer);
  if (!parsed.ok()) return parsed.status();
  const AdamWOptions adamw{.beta1 = static_cast<float>(spec.beta1),
                           .beta2 = static_cast<float>(spec.beta2),
                           .weight_decay = static_cast<float>(spec.weight_decay),
                           .max_grad_norm = static_cast<float>(spec.grad_clip)};
  if (parsed->kind == OptimizerSpec::Kind::kAdamW) {
    absl::StatusOr<std::unique_ptr<AdamWOptimizer>> created = AdamWOptimizer::Create(model, adamw);
    if (!created.ok()) return created.status();
    return std::make_unique<AdamWAdapter>(std::move(*created), static_cast<float>(spec.lr));
  }
  absl::StatusOr<std::unique_ptr<MuonOptimizer>> muon = MuonOptimizer::Create(
      model, MuonOptions{.spec = *parsed, .weight_decay = static_cast<float>(spec.weight_decay)},
      adamw, static_cast<float>(spec.muon_lr), static_cast<float>(spec.lr));
  if (!muon.ok()) return muon.status();
  return std::unique_ptr<Optimizer>(std::move(*muon));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const RunSpec& spec, Model& model) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateUnprofiled(spec, model);
  if (!optimizer.ok()) return optimizer.status();
  if (auto* profiler = dynamic_cast<ProfilingBackend*>(&model.backend())) {
    return std::unique_ptr<Optimizer>(
        std::make_unique<ProfiledOptimizer>(std::move(*optimizer), *profiler));
  }
  return optimizer;
}

}  // namespace smallem
