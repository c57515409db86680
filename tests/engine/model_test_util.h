// Helpers shared by the model tests: tiny configs, host/device copies, the
// finite-difference check and the one-batch overfit.
#ifndef SMALLEM_TESTS_ENGINE_MODEL_TEST_UTIL_H_
#define SMALLEM_TESTS_ENGINE_MODEL_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/random.h"
#include "gtest/gtest.h"

namespace smallem::testing {

inline ModelConfig TinyConfig(Architecture arch) {
  return ModelConfig{.vocab = 11, .context = 6, .layers = 2, .heads = 2, .embed = 8,
                     .architecture = arch};
}

inline std::vector<float> ToHost(Backend& be, const Tensor& t) {
  std::vector<float> out(t.numel());
  be.CopyToHost(out.data(), t.data, t.bytes());
  return out;
}

inline void FromHost(Backend& be, const Tensor& t, const std::vector<float>& v) {
  be.CopyToDevice(t.data, v.data(), t.bytes());
}

// Fills every parameter with N(0, scale²) values (gains around 1), larger
// than the training init so finite differences see clear slopes.
inline void Randomize(Model& model, uint64_t seed, double scale = 0.3) {
  Rng rng(seed);
  std::vector<float> v(model.values().numel());
  for (const Model::Parameter& p : model.parameters()) {
    float* dst = v.data() + (p.value.f32() - model.values().f32());
    const bool gain = p.name.ends_with(".gain");
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      dst[i] = static_cast<float>((gain ? 1.0 : 0.0) + scale * rng.Normal());
    }
  }
  FromHost(model.backend(), model.values(), v);
}

// Uploads token ids to an arena tensor.
inline Tensor Tokens(Arena& arena, Backend& be, const std::vector<int32_t>& ids) {
  Tensor t = arena.Allocate({static_cast<int64_t>(ids.size())}, DType::kI32);
  be.CopyToDevice(t.data, ids.data(), t.bytes());
  return t;
}

// The mean loss of one batch, read back to the host.
inline float MeanLoss(const Model& model, const std::vector<int32_t>& in,
                      const std::vector<int32_t>& tg, int64_t batch, int64_t time) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  Var loss = Mean(tape, model.Losses(tape, Tokens(arena, be, in), Tokens(arena, be, tg), batch, time));
  float v = 0;
  be.CopyToHost(&v, tape.value(loss).data, sizeof(float));
  return v;
}

// Compares the backward pass's gradient of the mean loss with central
// differences of step `eps` at three random elements of every parameter
// (Rng seed 3), each within 2e-3 + 3e-2·|numeric|; rows of a learned
// position table beyond `time` are never probed (they get no gradient).
// Returns how many elements were checked.
inline int ExpectGradientMatchesFiniteDifferences(Model& model, const std::vector<int32_t>& in,
                                                  const std::vector<int32_t>& tg, int64_t batch,
                                                  int64_t time, float eps) {
  Backend& be = model.backend();
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  model.ZeroGrad();
  tape.Backward(Mean(tape, model.Losses(tape, Tokens(arena, be, in), Tokens(arena, be, tg),
                                        batch, time)));
  const std::vector<float> grad = ToHost(be, model.grads());
  std::vector<float> values = ToHost(be, model.values());
  Rng rng(3);
  int checked = 0;
  for (const Model::Parameter& p : model.parameters()) {
    for (int probe = 0; probe < 3; ++probe) {
      int64_t local = static_cast<int64_t>(rng.Below(p.value.numel()));
      if (p.name == "positions.weight") local %= time * p.value.shape[1];
      const int64_t i = (p.value.f32() - model.values().f32()) + local;
      const float saved = values[i];
      values[i] = saved + eps;
      FromHost(be, model.values(), values);
      const double up = MeanLoss(model, in, tg, batch, time);
      values[i] = saved - eps;
      FromHost(be, model.values(), values);
      const double down = MeanLoss(model, in, tg, batch, time);
      values[i] = saved;
      FromHost(be, model.values(), values);
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 3e-2 * std::abs(numeric))
          << p.name << "[" << local << "]";
      ++checked;
    }
  }
  return checked;
}


// Mean loss before and after OverfitOneBatch.
struct OverfitLosses {
  float first = 0, last = 0;
};

// Trains `model` (initialized) for `steps` AdamW steps (lr 1e-2, no weight
// decay) on one fixed batch of 2 sequences of 6 tokens of a vocabulary of at
// least 11, balancing its experts' routers after each step (a no-op for a
// dense model). No sequence opens with a repeated token: with RoPE alone,
// [5] and [5, 5] are indistinguishable (values are not rotated), so no model
// could fit it.
inline OverfitLosses OverfitOneBatch(Model& model, int steps) {
  Backend& be = model.backend();
  absl::StatusOr<std::unique_ptr<AdamWOptimizer>> opt =
      AdamWOptimizer::Create(model, AdamWOptions{.weight_decay = 0});
  EXPECT_TRUE(opt.ok()) << opt.status();
  if (!opt.ok()) return {};
  const std::vector<int32_t> in = {1, 4, 2, 9, 3, 0, 5, 6, 10, 7, 2, 2};
  const std::vector<int32_t> tg = {4, 2, 9, 3, 8, 5, 6, 10, 7, 6, 1, 0};
  OverfitLosses losses{.first = MeanLoss(model, in, tg, 2, 6)};
  Arena arena(be, 1 << 20);
  Tape tape(be, arena);
  for (int step = 0; step < steps; ++step) {
    arena.Reset();
    tape.Reset();
    model.ZeroGrad();
    tape.Backward(
        Mean(tape, model.Losses(tape, Tokens(arena, be, in), Tokens(arena, be, tg), 2, 6)));
    (*opt)->Step(1e-2f);
    model.BalanceExperts();
  }
  losses.last = MeanLoss(model, in, tg, 2, 6);
  return losses;
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_ENGINE_MODEL_TEST_UTIL_H_
