#include "engine/train/evaluate.h"

#include <cmath>

#include "engine/autograd/tape.h"

namespace smallem {

EvalResult Evaluate(const Model& model, Arena& arena, std::span<const uint16_t> val,
                    const std::vector<int32_t>& token_bytes, const ValidationPlan& plan) {
  Backend& be = model.backend();
  const int64_t rows = plan.rows, time = plan.time, n = rows * time;
  std::vector<int32_t> inputs(n), targets(n);
  std::vector<float> losses(n);
  double total_loss = 0;
  EvalResult result{.batches = plan.batches};
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  for (int64_t k = 0; k < plan.batches; ++k) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t* seq = val.data() + plan.Start(k, r);
      for (int64_t t = 0; t < time; ++t) {
        inputs[r * time + t] = seq[t];
        targets[r * time + t] = seq[t + 1];
      }
    }
    arena.Reset();
    tape.Reset();
    Tensor in = arena.Allocate({n}, DType::kI32);
    Tensor tg = arena.Allocate({n}, DType::kI32);
    be.CopyToDevice(in.data, inputs.data(), in.bytes());
    be.CopyToDevice(tg.data, targets.data(), tg.bytes());
    Var loss = model.Losses(tape, in, tg, rows, time);
    be.CopyToHost(losses.data(), tape.value(loss).data, n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      total_loss += losses[i];
      result.bytes += token_bytes[targets[i]];
    }
    result.tokens += n;
  }
  arena.Reset();
  result.nats_per_token = total_loss / static_cast<double>(result.tokens);
  result.nats_per_byte = total_loss / static_cast<double>(result.bytes);
  result.bits_per_byte = result.nats_per_byte / std::log(2.0);
  return result;
}

}  // namespace smallem
