#include "engine/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "engine/autograd/tape.h"

namespace smallem {
namespace {

// One MTP depth's validation loss so far.
struct DepthTotal {
  double loss = 0;
  int64_t tokens = 0;
};

// Adds each MTP depth's losses of a pass to `depths`: the window's scored
// targets at rows t ≥ d (depth d predicts only there; engine/model/mtp.h).
void AddDepthLosses(Tape& tape, const Model::DepthLosses& all,
                    const std::vector<ValidationWindow>& windows, size_t first, int64_t rows,
                    int64_t time, std::vector<DepthTotal>& depths) {
  std::vector<float> losses(static_cast<size_t>(rows * time));
  for (size_t d = 0; d < all.depths.size(); ++d) {
    tape.backend().CopyToHost(losses.data(), tape.value(all.depths[d]).data,
                              losses.size() * sizeof(float));
    const auto depth = static_cast<int64_t>(d + 1);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = std::max(time - windows[first + r].scored, depth); t < time; ++t) {
        depths[d].loss += losses[r * time + t];
        ++depths[d].tokens;
      }
    }
  }
}

}  // namespace

EvalResult Evaluate(const Model& model, Arena& arena, std::span<const uint16_t> val,
                    const std::vector<int32_t>& token_bytes, const ValidationText& text,
                    int64_t rows_per_pass) {
  CHECK_GT(rows_per_pass, 0) << "evaluation rows per pass must be positive";
  CHECK_EQ(static_cast<int64_t>(val.size()), text.val_tokens)
      << "validation text planned for another split";
  Backend& be = model.backend();
  const std::vector<ValidationWindow> windows =
      ValidationWindows(text, model.config().context);
  std::vector<int32_t> inputs, targets;
  std::vector<float> losses;
  double total_loss = 0;
  EvalResult result{.batches = text.batches(), .spans = text.spans};
  std::vector<DepthTotal> depths(static_cast<size_t>(model.config().mtp));
  Tape tape(be, arena);
  tape.set_grad_enabled(false);
  for (size_t first = 0; first < windows.size();) {
    // A pass: consecutive windows of one length (all but the split's first
    // few have the full context).
    const int64_t time = windows[first].length;
    size_t last = first + 1;
    while (last < windows.size() && windows[last].length == time &&
           static_cast<int64_t>(last - first) < rows_per_pass) {
      ++last;
    }
    const int64_t rows = static_cast<int64_t>(last - first), n = rows * time;
    inputs.resize(static_cast<size_t>(n));
    targets.resize(static_cast<size_t>(n));
    losses.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t* seq = val.data() + windows[first + r].start;
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
    const Model::DepthLosses all = model.AllLosses(tape, in, tg, rows, time);
    be.CopyToHost(losses.data(), tape.value(all.next_token).data, n * sizeof(float));
    AddDepthLosses(tape, all, windows, first, rows, time, depths);
    for (int64_t r = 0; r < rows; ++r) {
      // Only the window's last `scored` targets are the span's; the others
      // were context.
      for (int64_t t = time - windows[first + r].scored; t < time; ++t) {
        total_loss += losses[r * time + t];
        result.bytes += token_bytes[targets[r * time + t]];
        ++result.tokens;
      }
    }
    first = last;
  }
  arena.Reset();
  CHECK_EQ(result.tokens, text.targets()) << "windows do not cover the spans";
  result.nats_per_token = total_loss / static_cast<double>(result.tokens);
  result.nats_per_byte = total_loss / static_cast<double>(result.bytes);
  result.bits_per_byte = result.nats_per_byte / std::log(2.0);
  for (const DepthTotal& d : depths) {
    result.mtp_nats_per_token.push_back(d.tokens > 0 ? d.loss / static_cast<double>(d.tokens)
                                                     : 0.0);
  }
  return result;
}

}  // namespace smallem
