// Timed training steps for the CPU benchmarks (train_bench.cc,
// optimizer_bench.cc): full steps — forward, backward, optimizer update — of
// a model on uniformly random tokens and targets, the loss read back to the
// host after every step (which also waits for the step to finish). A model
// with multi-token prediction trains its depths too (Model::TrainingObjective).
//
// Not thread-safe: one call at a time per model and backend.
#ifndef SMALLEM_BENCH_TRAINING_STEPS_H_
#define SMALLEM_BENCH_TRAINING_STEPS_H_

#include <cstdint>
#include <functional>

#include "engine/model/model.h"

namespace smallem::bench {

struct StepTiming {
  double seconds = 0;   // wall time of the timed steps, all together
  float last_loss = 0;  // mean next-token loss of the last step, nats per token
};

// Runs `warmup` untimed, then `steps` timed training steps of `model` on its
// backend, with batch `batch` and the model's context as T. Tokens and
// targets come from Rng(1), so every call sees the same data. After each
// backward pass `update` applies the optimizer (e.g. opt.Step(lr)).
// REQUIRES: steps > 0.
StepTiming TimeTrainingSteps(Model& model, int64_t batch, int64_t warmup, int64_t steps,
                             const std::function<void()>& update);

}  // namespace smallem::bench

#endif  // SMALLEM_BENCH_TRAINING_STEPS_H_
