#include "engine/optim/muon.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace smallem {
namespace {

// Squared norms below this count as zero: the row or matrix stays zero.
constexpr float kZeroNormSq = 1e-30f;

// Matrix i of a (n, rows, cols) stack.
Tensor Item(const Tensor& stack, int64_t i, int64_t rows, int64_t cols) {
  return Tensor{.data = stack.f32() + i * rows * cols, .shape = {rows, cols}};
}

}  // namespace

bool IsMuonParameter(const Model::Parameter& p) { return p.hidden_matrix; }

absl::StatusOr<std::unique_ptr<Muon>> Muon::Create(Backend& backend,
                                                   std::vector<MuonMatrix> matrices,
                                                   const MuonOptions& options) {
  for (const MuonMatrix& m : matrices) {
    if (m.value.shape.rank() != 2 || m.value.numel() == 0 || m.grad.shape != m.value.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "muon: ", m.name, " must be a non-empty 2-D matrix with a gradient of its shape (got ",
          m.value.shape.ToString(), ")"));
    }
  }
  if (options.spec.period < 1 || !(options.spec.boost >= 1) || options.power_iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "muon: period must be ≥ 1, boost ≥ 1 and power iterations ≥ 1 (got period=",
        options.spec.period, ", boost=", options.spec.boost, ", ", options.power_iterations,
        " power iterations)"));
  }
  std::unique_ptr<Muon> muon(new Muon(backend, std::move(matrices), options));
  muon->schedule_ = options.spec.schedule == OptimizerSpec::Schedule::kShort
                        ? &ShortNewtonSchulzSchedule()
                        : &StandardNewtonSchulzSchedule();

  // Stacks in order of first appearance, members in matrix order.
  std::map<std::pair<int64_t, int64_t>, size_t> by_shape;
  for (size_t i = 0; i < muon->matrices_.size(); ++i) {
    const Shape& shape = muon->matrices_[i].value.shape;
    const std::pair<int64_t, int64_t> key{shape[0], shape[1]};
    auto it = by_shape.find(key);
    if (!options.spec.stack || it == by_shape.end()) {
      by_shape[key] = muon->stacks_.size();
      muon->stacks_.push_back(Stack{.rows = shape[0], .cols = shape[1]});
      it = by_shape.find(key);
    }
    muon->stacks_[it->second].members.push_back(i);
  }

  int64_t state_floats = 0, work_floats = 0;
  for (const Stack& s : muon->stacks_) {
    const auto n = static_cast<int64_t>(s.members.size());
    state_floats += PaddedFloats(n * s.rows * s.cols) + (options.spec.norm ? PaddedFloats(n * s.rows) : 0);
    work_floats = std::max(work_floats, WorkFloats(n, s.rows, s.cols));
  }
  state_floats += PaddedFloats(muon->ScalarCount());
  if (!muon->stacks_.empty()) {
    ASSIGN_OR_RETURN(muon->state_, backend.Allocate(state_floats * sizeof(float)));
    ASSIGN_OR_RETURN(muon->scratch_, backend.Allocate(work_floats * sizeof(float)));
  }
  float* base = static_cast<float*>(muon->state_);
  for (Stack& s : muon->stacks_) {
    const auto n = static_cast<int64_t>(s.members.size());
    s.momentum = Tensor{.data = base, .shape = {n, s.rows, s.cols}};
    base += PaddedFloats(n * s.rows * s.cols);
    if (options.spec.norm) {
      s.row_stat = Tensor{.data = base, .shape = {n * s.rows}};
      base += PaddedFloats(n * s.rows);
    }
  }
  if (base != nullptr) muon->own_scalars_ = Tensor{.data = base, .shape = {muon->ScalarCount()}};
  return muon;
}

Muon::~Muon() {
  if (state_) backend_.Free(state_);
  if (scratch_) backend_.Free(scratch_);
}

std::vector<std::vector<std::string>> Muon::Stacks() const {
  std::vector<std::vector<std::string>> out;
  for (const Stack& s : stacks_) {
    out.emplace_back();
    for (size_t i : s.members) out.back().push_back(matrices_[i].name);
  }
  return out;
}

std::vector<Optimizer::StateTensor> Muon::StateTensors() const {
  std::vector<Optimizer::StateTensor> out;
  for (size_t i = 0; i < stacks_.size(); ++i) {
    const std::string prefix = absl::StrCat("muon.stack", i, ".");
    out.push_back({prefix + "momentum", stacks_[i].momentum});
    if (!stacks_[i].row_stat.empty()) out.push_back({prefix + "row_stat", stacks_[i].row_stat});
  }
  return out;
}

int64_t Muon::WorkFloats(int64_t n, int64_t rows, int64_t cols) {
  return PaddedFloats(n * rows * cols) + NewtonSchulzWorkspaceFloats(n, rows, cols) +
         PaddedFloats(n * rows) + 2 * PaddedFloats(n) + PaddedFloats(n * cols) + PaddedFloats(n * rows);
}

Muon::Work Muon::CarveWork(int64_t n, int64_t rows, int64_t cols) const {
  float* base = static_cast<float*>(scratch_);
  Work w;
  w.update = Tensor{.data = base, .shape = {n, rows, cols}};
  base += PaddedFloats(n * rows * cols);
  w.ns = CarveNewtonSchulzWorkspace(base, n, rows, cols);
  base += NewtonSchulzWorkspaceFloats(n, rows, cols);
  w.row_sq = Tensor{.data = base, .shape = {n * rows}};
  base += PaddedFloats(n * rows);
  w.norm_before = Tensor{.data = base, .shape = {n}};
  base += PaddedFloats(n);
  w.norm_after = Tensor{.data = base, .shape = {n}};
  base += PaddedFloats(n);
  w.right = Tensor{.data = base, .shape = {n, cols}};
  base += PaddedFloats(n * cols);
  w.left = Tensor{.data = base, .shape = {n, rows}};
  return w;
}

void Muon::Prepare(float lr, float* scalars) {
  ++step_;
  orthogonalize_ = (step_ - 1) % options_.spec.period == 0;
  // W ← (1 − η·λ)·W − η·scale·O: the two factors, in f32 as the update
  // applies them.
  scalars[0] = 1.0f - lr * options_.weight_decay;
  for (size_t i = 0; i < stacks_.size(); ++i) {
    const Stack& s = stacks_[i];
    float scale = options_.rms_scale * std::sqrt(static_cast<float>(std::max(s.rows, s.cols)));
    if (!orthogonalize_) scale *= options_.row_step_scale;
    scalars[1 + i] = -lr * scale;
  }
}

void Muon::Update(const Tensor& scalars) {
  CHECK_EQ(scalars.numel(), ScalarCount()) << "muon: scalars";
  const Tensor keep = Tensor{.data = scalars.f32(), .shape = {1}};
  for (size_t i = 0; i < stacks_.size(); ++i) {
    StepStack(stacks_[i], keep, Tensor{.data = scalars.f32() + 1 + i, .shape = {1}});
  }
}

void Muon::Step(float lr) {
  if (stacks_.empty()) return;
  std::vector<float> scalars(static_cast<size_t>(ScalarCount()));
  Prepare(lr, scalars.data());
  backend_.CopyToDevice(own_scalars_.data, scalars.data(), own_scalars_.bytes());
  Update(own_scalars_);
}

void Muon::StepStack(const Stack& s, const Tensor& keep, const Tensor& factor) {
  Backend& be = backend_;
  const auto n = static_cast<int64_t>(s.members.size());
  const int64_t rows = s.rows, cols = s.cols;
  const Work w = CarveWork(n, rows, cols);
  const float mu = options_.momentum;

  // Nesterov: M ← μ·M + G, U ← G + μ·M. The stack-wide scalings run once;
  // the gradients live in the model's buffer, so they are added per matrix.
  be.RowScale(RowScaleParams{.in = s.momentum, .out = s.momentum, .alpha = mu});
  for (int64_t i = 0; i < n; ++i) {
    const Tensor m = Item(s.momentum, i, rows, cols);
    be.Add(BinaryParams{.a = m, .b = matrices_[s.members[i]].grad, .out = m});
  }
  be.RowScale(RowScaleParams{.in = s.momentum, .out = w.update, .alpha = mu});
  for (int64_t i = 0; i < n; ++i) {
    const Tensor u = Item(w.update, i, rows, cols);
    be.Add(BinaryParams{.a = u, .b = matrices_[s.members[i]].grad, .out = u});
  }

  if (orthogonalize_) {
    const bool boost = options_.spec.boost != 1.0;
    // u₁, v₁ belong to U, before orthogonalization flattens its spectrum.
    if (boost) TopSingularVectors(s, w);
    Orthogonalize(be, w.update, *schedule_, w.ns);
    if (options_.spec.norm) NormalizeNeurons(s, w);
    if (boost) Boost(s, w);
  } else {
    NormalizeRows(w.update, w.row_sq, n * rows, cols);
  }

  // W ← (1 − η·λ)·W − η·scale·O, both factors read on the device (Prepare
  // wrote them). The decay runs whenever λ ≠ 0, also on a step where η = 0
  // and its factor is exactly 1 (x·1 = x), so that every step of a variant
  // makes the same calls.
  be.RowScale(RowScaleParams{.in = w.update, .out = w.update, .scale = factor});
  for (int64_t i = 0; i < n; ++i) {
    const Tensor value = matrices_[s.members[i]].value;
    if (options_.weight_decay != 0.0f) {
      be.RowScale(RowScaleParams{.in = value, .out = value, .scale = keep});
    }
    be.Add(BinaryParams{.a = value, .b = Item(w.update, i, rows, cols), .out = value});
  }
}

void Muon::NormalizeRows(const Tensor& update, const Tensor& row_sq, int64_t rows_total,
                         int64_t cols) {
  const Tensor rows = update.Reshaped({rows_total, cols});
  backend_.RowSumSquares(RowReduceParams{.in = rows, .out = row_sq});
  backend_.RowScale(RowScaleParams{.in = rows, .out = rows, .denom = row_sq, .eps = kZeroNormSq});
}

void Muon::NormalizeNeurons(const Stack& s, const Work& w) {
  Backend& be = backend_;
  const auto n = static_cast<int64_t>(s.members.size());
  const Tensor matrices = w.update.Reshaped({n, s.rows * s.cols});
  const Tensor neurons = w.update.Reshaped({n * s.rows, s.cols});
  be.RowSumSquares(RowReduceParams{.in = matrices, .out = w.norm_before});
  // v ← β·v + (1 − β)·mean(O_row²). No bias correction: it would scale every
  // neuron of a matrix alike, and the Frobenius norm is restored below.
  const float beta = options_.norm_beta;
  be.RowSumSquares(RowReduceParams{.in = neurons, .out = s.row_stat,
                                   .alpha = (1.0f - beta) / static_cast<float>(s.cols),
                                   .beta = beta});
  be.RowScale(RowScaleParams{.in = neurons, .out = neurons, .denom = s.row_stat,
                             .eps = options_.norm_eps});
  be.RowSumSquares(RowReduceParams{.in = matrices, .out = w.norm_after});
  be.RowScale(RowScaleParams{.in = matrices, .out = matrices, .numer = w.norm_before,
                             .denom = w.norm_after});
}

void Muon::TopSingularVectors(const Stack& s, const Work& w) {
  Backend& be = backend_;
  const auto n = static_cast<int64_t>(s.members.size());
  const int64_t rows = s.rows, cols = s.cols, size = rows * cols;
  // Power iteration on Uᵀ·U from the all-ones vector, one batched
  // matrix-vector product per direction for the whole stack.
  be.Fill(w.right, 1.0f);
  auto times_u = [&] {  // left = U·right
    be.Matmul(MatmulParams{.a = w.update, .b = w.right, .out = w.left, .m = rows, .n = 1,
                           .k = cols, .batch = n, .stride_a = size, .stride_b = cols,
                           .stride_out = rows});
  };
  for (int it = 0; it < options_.power_iterations; ++it) {
    times_u();
    be.Matmul(MatmulParams{.a = w.update, .b = w.left, .out = w.right, .m = cols, .n = 1,
                           .k = rows, .trans_a = true, .batch = n, .stride_a = size,
                           .stride_b = rows, .stride_out = cols});
    be.RowSumSquares(RowReduceParams{.in = w.right, .out = w.norm_after});
    be.RowScale(RowScaleParams{.in = w.right, .out = w.right, .denom = w.norm_after,
                               .eps = kZeroNormSq});
  }
  times_u();
  be.RowSumSquares(RowReduceParams{.in = w.left, .out = w.norm_after});
  be.RowScale(RowScaleParams{.in = w.left, .out = w.left, .denom = w.norm_after,
                             .eps = kZeroNormSq});
}

void Muon::Boost(const Stack& s, const Work& w) {
  // O ← γ·O − (γ − 1)·u₁·v₁ᵀ: one rank-1 product per matrix, batched.
  const auto n = static_cast<int64_t>(s.members.size());
  const auto gamma = static_cast<float>(options_.spec.boost);
  backend_.Matmul(MatmulParams{.a = w.left, .b = w.right, .out = w.update, .m = s.rows,
                               .n = s.cols, .k = 1, .batch = n, .stride_a = s.rows,
                               .stride_b = s.cols, .stride_out = s.rows * s.cols,
                               .alpha = 1.0f - gamma, .beta = gamma});
}

absl::StatusOr<std::unique_ptr<MuonOptimizer>> MuonOptimizer::Create(
    Model& model, const MuonOptions& muon_options, const AdamWOptions& adamw_options,
    float muon_lr, float adamw_lr) {
  std::vector<MuonMatrix> matrices;
  for (const Model::Parameter& p : model.parameters()) {
    if (IsMuonParameter(p)) matrices.push_back(MuonMatrix{p.name, p.value, p.grad});
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Muon> muon,
                   Muon::Create(model.backend(), std::move(matrices), muon_options));
  AdamWOptions rest = adamw_options;
  rest.include = [](const Model::Parameter& p) { return !IsMuonParameter(p); };
  ASSIGN_OR_RETURN(std::unique_ptr<AdamWOptimizer> adamw, AdamWOptimizer::Create(model, rest));
  return std::unique_ptr<MuonOptimizer>(new MuonOptimizer(
      model.backend(), std::move(muon), std::move(adamw), muon_lr, adamw_lr));
}

void MuonOptimizer::Prepare(float lr_scale, float* scalars) {
  adamw_->Prepare(adamw_lr_ * lr_scale, scalars);
  muon_->Prepare(muon_lr_ * lr_scale, scalars + AdamWOptimizer::kScalarCount);
}

std::vector<Optimizer::StateTensor> MuonOptimizer::StateTensors() const {
  std::vector<StateTensor> out = adamw_->StateTensors("adamw.");
  for (StateTensor& t : muon_->StateTensors()) out.push_back(std::move(t));
  return out;
}

void MuonOptimizer::Update(const Tensor& scalars) {
  CHECK_EQ(scalars.numel(), ScalarCount()) << "muon optimizer: scalars";
  constexpr int64_t kAdamW = AdamWOptimizer::kScalarCount;
  adamw_->Update(Tensor{.data = scalars.f32(), .shape = {kAdamW}});
  muon_->Update(Tensor{.data = scalars.f32() + kAdamW, .shape = {muon_->ScalarCount()}});
}

}  // namespace smallem
