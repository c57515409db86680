#include "engine/optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "engine/optim/adamw.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const RunSpec& spec, Model& model) {
  if (spec.optimizer == "adamw") {
    absl::StatusOr<std::unique_ptr<AdamWOptimizer>> adamw = AdamWOptimizer::Create(
        model, AdamWOptions{.beta1 = static_cast<float>(spec.beta1),
                            .beta2 = static_cast<float>(spec.beta2),
                            .weight_decay = static_cast<float>(spec.weight_decay),
                            .max_grad_norm = static_cast<float>(spec.grad_clip)});
    if (!adamw.ok()) return adamw.status();
    return std::make_unique<AdamWAdapter>(std::move(*adamw), static_cast<float>(spec.lr));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", spec.optimizer, "\" (expected adamw)"));
}

}  // namespace smallem
