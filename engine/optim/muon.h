// Muon (docs/muon.md; docs/muon.md): momentum
// orthogonalized by Newton–Schulz for the hidden 2-D matrices, AdamW for
// everything else (embeddings, positions, norms, biases).
//
// One step on the matrices, with μ = 0.95 and η the Muon learning rate:
//   M ← μ·M + G;  U ← G + μ·M                      Nesterov momentum
//   O ← Orthogonalize(U)                            on steps 1, 1 + K, 1 + 2K…
//         (`period=K`, K = 1 by default), then when asked
//         NorMuon (`norm`): O ← O / √(v + ε) per neuron (row), v the running
//           mean of the neuron's mean squared update, O rescaled to keep its
//           Frobenius norm;
//         SAMuon-lite (`boost=γ`): O ← γ·O − (γ − 1)·u₁·v₁ᵀ, u₁, v₁ the top
//           singular vectors of U from 10 power iterations on Uᵀ·U;
//   O ← 0.15 · rows of U scaled to norm 1           on the other steps
//   W ← (1 − η·λ)·W − η · 0.18·√max(rows, cols) · O  decoupled weight decay
//
// Matrices of one (rows, cols) shape form a stack: their momenta sit side by
// side in one (n, rows, cols) buffer and every product runs once for the
// stack (`stack=off`: one stack per matrix). Each matrix keeps its own
// normalizations, so stacking changes the number of products, not the
// numbers (bit for bit where the backend computes each item of a batched
// product as it would alone; see Orthogonalize). Everything stays on the
// device: no host sync in a step, and the factors that change per step
// (η·λ, η·scale) are read from device memory (Prepare/Update), so that a
// captured step replays with the current learning rate.
// Not thread-safe; one caller at a time, like the Backend it uses.
#ifndef SMALLEM_ENGINE_OPTIM_MUON_H_
#define SMALLEM_ENGINE_OPTIM_MUON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/optim/newton_schulz.h"
#include "engine/optim/optimizer.h"
#include "runspec/optimizer_spec.h"

namespace smallem {

struct MuonOptions {
  OptimizerSpec spec;           // schedule, period, norm, boost, stack
  float momentum = 0.95f;       // Nesterov μ
  float weight_decay = 0.1f;    // decoupled λ
  float rms_scale = 0.18f;      // update RMS: O scaled by rms_scale·√max(rows, cols)
  float row_step_scale = 0.15f; // period=K: the row-normalized steps' factor
  float norm_beta = 0.95f;      // NorMuon: running mean of each neuron's squared update
  float norm_eps = 1e-10f;      //   added to that mean before its square root
  int power_iterations = 10;    // SAMuon-lite: iterations for u₁, v₁
};

// One matrix Muon updates: value and gradient, (rows, cols) row-major.
struct MuonMatrix {
  std::string name;
  Tensor value, grad;
};

// The Muon update over a fixed list of matrices. Tests drive it directly on
// hand-made matrices; MuonOptimizer drives it on a model's hidden matrices.
class Muon {
 public:
  // Allocates the momenta (and NorMuon's statistics) zeroed, and the scratch
  // of the largest stack. Errors: an empty or non-2-D matrix, or out of memory.
  static absl::StatusOr<std::unique_ptr<Muon>> Create(Backend& backend,
                                                      std::vector<MuonMatrix> matrices,
                                                      const MuonOptions& options);
  ~Muon();
  Muon(const Muon&) = delete;
  Muon& operator=(const Muon&) = delete;

  // Scalars a step reads on the device: the weight-decay factor 1 − η·λ,
  // then each stack's update factor −η·scale (RowScaleParams::scale).
  int64_t ScalarCount() const { return 1 + static_cast<int64_t>(stacks_.size()); }
  // The host half of one update with learning rate `lr` (already
  // scheduled): counts the step, decides whether it orthogonalizes and
  // writes its scalars into scalars[0, ScalarCount()).
  void Prepare(float lr, float* scalars);
  // The device half of the prepared update; `scalars`: device memory,
  // (ScalarCount()) f32.
  void Update(const Tensor& scalars);
  // Both, through a device buffer of its own.
  void Step(float lr);
  // Whether the prepared update orthogonalizes (0) or normalizes rows (1):
  // the two sequences of calls a step can make.
  int UpdateVariant() const { return orthogonalize_ ? 0 : 1; }

  int64_t steps() const { return step_; }
  // For checkpoints (Optimizer::StateTensors): each stack's momenta,
  // "muon.stackI.momentum", and NorMuon's statistics,
  // "muon.stackI.row_stat"; and the step count a resume continues from.
  std::vector<Optimizer::StateTensor> StateTensors() const;
  void RestoreSteps(int64_t steps) { step_ = steps; }
  // Stacks, each the names of its matrices in order.
  std::vector<std::vector<std::string>> Stacks() const;

 private:
  struct Stack {
    std::vector<size_t> members;  // indices in matrices_
    int64_t rows = 0, cols = 0;
    Tensor momentum;  // (n, rows, cols) M
    Tensor row_stat;  // (n·rows) NorMuon running mean, or empty
  };
  // Per-step scratch of one stack, carved from scratch_.
  struct Work {
    Tensor update;                  // (n, rows, cols) U, then O
    NewtonSchulzWorkspace ns;
    Tensor row_sq;                  // (n·rows)
    Tensor norm_before, norm_after; // (n)
    Tensor right, left;             // (n, cols) v₁ and (n, rows) u₁
  };
  static int64_t WorkFloats(int64_t n, int64_t rows, int64_t cols);
  Work CarveWork(int64_t n, int64_t rows, int64_t cols) const;

  Muon(Backend& backend, std::vector<MuonMatrix> matrices, const MuonOptions& options)
      : backend_(backend), matrices_(std::move(matrices)), options_(options) {}
  void StepStack(const Stack& s, const Tensor& keep, const Tensor& factor);
  void NormalizeRows(const Tensor& update, const Tensor& row_sq, int64_t rows_total, int64_t cols);
  void NormalizeNeurons(const Stack& s, const Work& w);
  void TopSingularVectors(const Stack& s, const Work& w);
  void Boost(const Stack& s, const Work& w);

  Backend& backend_;
  std::vector<MuonMatrix> matrices_;
  MuonOptions options_;
  const NewtonSchulzSchedule* schedule_ = nullptr;
  std::vector<Stack> stacks_;
  void* state_ = nullptr;    // momenta, NorMuon statistics and Step's scalars
  void* scratch_ = nullptr;  // one stack's Work at a time
  Tensor own_scalars_;       // (ScalarCount()) for Step
  int64_t step_ = 0;
  bool orthogonalize_ = true;  // of the prepared step
};

// Whether Muon (rather than AdamW) updates a model parameter: the hidden 2-D
// matrices, every blocks.* and mtp.* weight of rank 2 (the layout decides:
// ParameterSlot::hidden_matrix, runspec/parameter_layout.h).
bool IsMuonParameter(const Model::Parameter& p);

// The Optimizer for `muon…` specs: Muon at muon_lr on the hidden matrices,
// AdamW at adamw_lr on the rest (clipped by the whole model's gradient norm,
// as AdamW alone is; Muon's update is normalized and needs no clipping).
// Both rates follow the schedule's multiplier.
class MuonOptimizer final : public Optimizer {
 public:
  static absl::StatusOr<std::unique_ptr<MuonOptimizer>> Create(Model& model,
                                                               const MuonOptions& muon,
                                                               const AdamWOptions& adamw,
                                                               float muon_lr, float adamw_lr);
  // AdamW's scalars, then Muon's.
  int64_t ScalarCount() const override {
    return AdamWOptimizer::kScalarCount + muon_->ScalarCount();
  }
  void Prepare(float lr_scale, float* scalars) override;
  void Update(const Tensor& scalars) override;
  int UpdateVariant() const override { return muon_->UpdateVariant(); }
  // AdamW's, computed over every gradient before Muon's update.
  Tensor GradNormSquared() const override { return adamw_->ComputedGradNormSquared(); }
  // AdamW's moments ("adamw.m", "adamw.v"), then Muon's.
  std::vector<StateTensor> StateTensors() const override;
  int64_t Steps() const override { return muon_->steps(); }
  void RestoreSteps(int64_t steps) override {
    adamw_->RestoreSteps(steps);
    muon_->RestoreSteps(steps);
  }
  const Muon& muon() const { return *muon_; }

 private:
  MuonOptimizer(Backend& backend, std::unique_ptr<Muon> muon,
                std::unique_ptr<AdamWOptimizer> adamw, float muon_lr, float adamw_lr)
      : Optimizer(backend),
        muon_(std::move(muon)),
        adamw_(std::move(adamw)),
        muon_lr_(muon_lr),
        adamw_lr_(adamw_lr) {}

  std::unique_ptr<Muon> muon_;
  std::unique_ptr<AdamWOptimizer> adamw_;
  float muon_lr_, adamw_lr_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OPTIM_MUON_H_
