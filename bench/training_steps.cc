#include "bench/training_steps.h"

#include <chrono>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/random.h"

namespace smallem::bench {

StepTiming TimeTrainingSteps(Model& model, int64_t batch, int64_t warmup, int64_t steps,
                             const std::function<void()>& update) {
  Backend& backend = model.backend();
  const int64_t B = batch, T = model.config().context, vocab = model.config().vocab;
  Arena arena(backend);
  Tape tape(backend, arena);
  Rng rng(1);
  std::vector<int32_t> in(B * T), tg(B * T);
  StepTiming timing;
  std::chrono::steady_clock::time_point start;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    if (step == warmup) start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < B * T; ++i) {
      in[i] = static_cast<int32_t>(rng.Below(vocab));
      tg[i] = static_cast<int32_t>(rng.Below(vocab));
    }
    arena.Reset();
    tape.Reset();
    Tensor ti = arena.Allocate({B * T}, DType::kI32), tt = arena.Allocate({B * T}, DType::kI32);
    backend.CopyToDevice(ti.data, in.data(), ti.bytes());
    backend.CopyToDevice(tt.data, tg.data(), tt.bytes());
    model.ZeroGrad();
    // The step training runs: with MTP the depths' losses are trained too.
    const Model::TrainingLoss loss = model.TrainingObjective(tape, ti, tt, B, T);
    tape.Backward(loss.total);
    update();
    backend.CopyToHost(&timing.last_loss, tape.value(loss.next_token).data, sizeof(float));
  }
  timing.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return timing;
}

}  // namespace smallem::bench
