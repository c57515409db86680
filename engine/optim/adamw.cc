#include "engine/optim/adamw.h"

#include "base/status_macros.h"

namespace smallem {

absl::StatusOr<std::unique_ptr<AdamWOptimizer>> AdamWOptimizer::Create(
    Model& model, const AdamWOptions& options) {
  std::unique_ptr<AdamWOptimizer> opt(new AdamWOptimizer(model, options));
  int64_t n = 0;
  const std::vector<Model::Parameter>& params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (options.include && !options.include(params[i])) continue;
    opt->slots_.push_back(Slot{.parameter = i, .offset = n});
    n += params[i].value.numel();
  }
  // m and v, then the norm (padded to keep 64-byte alignment) and Step's
  // scalars.
  ASSIGN_OR_RETURN(opt->buffer_, model.backend().Allocate((2 * n + 16) * sizeof(float)));
  float* base = static_cast<float*>(opt->buffer_);
  opt->m_ = Tensor{.data = base, .shape = {n}};
  opt->v_ = Tensor{.data = base + n, .shape = {n}};
  opt->norm_sq_ = Tensor{.data = base + 2 * n, .shape = {1}};
  opt->own_scalars_ = Tensor{.data = base + 2 * n + 4, .shape = {kScalarCount}};
  return opt;
}

AdamWOptimizer::~AdamWOptimizer() {
  if (buffer_) model_.backend().Free(buffer_);
}

void AdamWOptimizer::Prepare(float lr, float* scalars) {
  ++step_;
  const AdamWStepScalars s = MakeAdamWStepScalars(lr, options_.beta1, options_.beta2, step_);
  scalars[0] = s.lr;
  scalars[1] = s.correction1;
  scalars[2] = s.correction2;
}

void AdamWOptimizer::Update(const Tensor& scalars) {
  Backend& be = model_.backend();
  const bool clip = options_.max_grad_norm > 0;
  if (clip) be.SumSquares(ReduceParams{.in = model_.grads(), .out = norm_sq_});
  for (const Slot& slot : slots_) {
    const Model::Parameter& p = model_.parameters()[slot.parameter];
    const int64_t offset = slot.offset;
    be.AdamW(AdamWParams{
        .param = p.value, .grad = p.grad,
        .m = Tensor{.data = m_.f32() + offset, .shape = p.value.shape},
        .v = Tensor{.data = v_.f32() + offset, .shape = p.value.shape},
        .grad_norm_sq = clip ? norm_sq_ : Tensor{},
        .scalars = scalars,
        .beta1 = options_.beta1, .beta2 = options_.beta2, .eps = options_.eps,
        .weight_decay = p.decay ? options_.weight_decay : 0.0f,
        .max_grad_norm = options_.max_grad_norm});
  }
}

void AdamWOptimizer::Step(float lr) {
  float scalars[kScalarCount];
  Prepare(lr, scalars);
  model_.backend().CopyToDevice(own_scalars_.data, scalars, sizeof(scalars));
  Update(own_scalars_);
}

}  // namespace smallem
