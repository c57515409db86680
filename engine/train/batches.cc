#include "engine/train/batches.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace smallem {

TrainBatches::TrainBatches(std::span<const uint16_t> tokens, int64_t batch, int64_t time,
                           uint64_t seed)
    : tokens_(tokens), batch_(batch), time_(time), rng_(seed) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CHECK_GT(n, time) << "training split shorter than one sequence";
  for (int64_t start = 0; start + time + 1 <= n; start += time) order_.push_back(start);
  Shuffle();
}

void TrainBatches::Shuffle() {
  // Fisher–Yates with our own generator: identical on every platform.
  for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i) {
    std::swap(order_[i], order_[rng_.Below(static_cast<uint64_t>(i) + 1)]);
  }
  cursor_ = 0;
}

void TrainBatches::NextStarts(int64_t* starts) {
  for (int64_t r = 0; r < batch_; ++r) {
    if (cursor_ == static_cast<int64_t>(order_.size())) Shuffle();
    starts[r] = order_[cursor_++];
    ++consumed_;
  }
}

void TrainBatches::Next(int32_t* inputs, int32_t* targets) {
  std::vector<int64_t> starts(static_cast<size_t>(batch_));
  NextStarts(starts.data());
  for (int64_t r = 0; r < batch_; ++r) {
    const uint16_t* seq = tokens_.data() + starts[r];
    for (int64_t t = 0; t < time_; ++t) {
      inputs[r * time_ + t] = seq[t];
      targets[r * time_ + t] = seq[t + 1];
    }
  }
}

TrainBatches::State TrainBatches::Save() const {
  return State{.rng = rng_.state(), .order = order_, .cursor = cursor_, .consumed = consumed_};
}

absl::Status TrainBatches::Restore(State state) {
  const auto n = static_cast<int64_t>(order_.size());
  if (static_cast<int64_t>(state.order.size()) != n || state.cursor < 0 ||
      state.cursor > n || state.consumed < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data order: the checkpoint's order holds ", state.order.size(), " sequences (cursor ",
        state.cursor, "); this split cut in sequences of ", time_, " holds ", n));
  }
  for (int64_t start : state.order) {
    if (start < 0 || start + time_ + 1 > static_cast<int64_t>(tokens_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("data order: sequence start ", start, " lies outside the split"));
    }
  }
  rng_.set_state(state.rng);
  order_ = std::move(state.order);
  cursor_ = state.cursor;
  consumed_ = state.consumed;
  return absl::OkStatus();
}

double TrainBatches::epochs() const {
  return static_cast<double>(consumed_) / static_cast<double>(order_.size());
}

}  // namespace smallem
