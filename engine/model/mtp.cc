// Multi-token prediction: the Model members that build the MTP depths
// (engine/model/mtp.h says what they compute).
#include "engine/model/mtp.h"

#include <vector>

#include "base/check.h"
#include "engine/model/model.h"

namespace smallem {

const Tensor& Model::MtpConstants(int64_t batch, int64_t time) const {
  auto [it, inserted] = mtp_constants_.try_emplace({batch, time});
  if (!inserted) return it->second;
  const int64_t n = batch * time, depths = config_.mtp;
  // One block: the shift ids (i32), then the masks (f32), both 4 bytes.
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::vector<float> masks(static_cast<size_t>(depths * n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = i % time;
    ids[i] = static_cast<int32_t>(t == 0 ? i : i - 1);
    for (int64_t d = 1; d <= depths; ++d) {
      // Mean over the B·T rows of loss · mask = weight/D · (mean over the
      // B·(T − d) scored rows).
      masks[(d - 1) * n + i] =
          t < d ? 0.0f
                : static_cast<float>(config_.mtp_weight * time /
                                     (static_cast<double>(depths) * (time - d)));
    }
  }
  absl::StatusOr<void*> data = backend_.Allocate((ids.size() + masks.size()) * 4);
  CHECK(data.ok()) << "MTP constants for (B " << batch << ", T " << time
                   << "): " << data.status().message();
  backend_.CopyToDevice(*data, ids.data(), ids.size() * 4);
  backend_.CopyToDevice(static_cast<int32_t*>(*data) + n, masks.data(), masks.size() * 4);
  it->second = Tensor{.data = *data, .shape = {(1 + depths) * n}, .dtype = DType::kI32};
  return it->second;
}

Model::DepthLosses Model::AllLosses(Tape& tape, Tensor tokens, Tensor targets, int64_t batch,
                                    int64_t time) const {
  const Var target_ids = tape.Input(targets);
  return StreamLosses(tape, tokens, batch, time, [&](Var normed, size_t) {
    // f32 logits, as Logits.
    return CrossEntropy(tape, Linear(tape, normed, Param(tape, embed_), Var{}, Output::kF32),
                        target_ids);
  });
}

Model::DepthLosses Model::StreamLosses(Tape& tape, Tensor tokens, int64_t batch, int64_t time,
                                       const std::function<Var(Var, size_t)>& head) const {
  const NormedSum main = Stream(tape, tokens, batch, time);
  DepthLosses out{.next_token = head(main.normed, 0)};
  if (mtp_.empty()) return out;
  CHECK_GT(time, config_.mtp) << "MTP needs sequences longer than its depths";
  const int64_t n = batch * time;
  Tensor shift = MtpConstants(batch, time);
  shift.shape = {n};
  // Row t of every depth embeds token t (see mtp.h: rows are laid out by
  // the target they predict).
  const Var embedded = Embedding(tape, tape.Input(tokens), Param(tape, embed_));
  const Var shift_ids = tape.Input(shift);
  Var hidden = main.sum;
  for (size_t d = 0; d < mtp_.size(); ++d) {
    const MtpDepth& m = mtp_[d];
    // The previous depth's stream, one row later: row t holds row t − 1.
    const Var previous = Embedding(tape, shift_ids, hidden);
    // f32 products, so the depth's residual stream is f32 like the main one.
    const Var merged = Add(
        tape,
        Linear(tape, Norm(tape, previous, m.hidden_gain, m.hidden_bias),
               Param(tape, m.hidden_weight), Var{}, Output::kF32),
        Linear(tape, Norm(tape, embedded, m.embed_gain, m.embed_bias),
               Param(tape, m.embed_weight), Var{}, Output::kF32));
    const Block& block = mtp_blocks_[d];
    const NormedSum in{.sum = merged,
                       .normed = Norm(tape, merged, block.ln1_gain, block.ln1_bias)};
    Var keys;  // a depth's block owns its keys
    const NormedSum after =
        BlockForward(tape, block, in, m.final_gain, m.final_bias, batch, time, &keys);
    out.depths.push_back(head(after.normed, d + 1));
    hidden = after.sum;
  }
  return out;
}

Model::TrainingLoss Model::TrainingObjective(Tape& tape, Tensor tokens, Tensor targets,
                                             int64_t batch, int64_t time) const {
  // Each stream's mean loss with the head (HeadLoss: in chunks where the
  // backend asks), depth d's rows weighted by its mask.
  const Var target_ids = tape.Input(targets);
  const int64_t n = batch * time;
  const Tensor constants = mtp_.empty() ? Tensor{} : MtpConstants(batch, time);
  const DepthLosses losses =
      StreamLosses(tape, tokens, batch, time, [&](Var normed, size_t d) {
        const Tensor mask =
            d == 0 ? Tensor{}
                   : Tensor{.data = static_cast<float*>(constants.data) + d * n, .shape = {n}};
        return HeadLoss(tape, normed, Param(tape, embed_), target_ids, mask);
      });
  TrainingLoss out{.total = losses.next_token, .next_token = losses.next_token};
  for (Var depth : losses.depths) out.total = Add(tape, out.total, depth);
  return out;
}

}  // namespace smallem
