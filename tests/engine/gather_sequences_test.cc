// The gather_sequences op (the trainer's device-side batches): reference
// values on a hand-made split, agreement with TrainBatches' host batches
// over epochs, and the death of a start without room for its sequence. It
// has no gradient (its outputs are token ids), so no finite-difference check.
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/profiler.h"
#include "engine/train/batches.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

class GatherSequencesTest : public testing::CpuOpTest {
 protected:
  Tensor I32(const std::vector<int32_t>& values) {
    Tensor t = Zeros({static_cast<int64_t>(values.size())}, DType::kI32);
    std::copy(values.begin(), values.end(), t.i32());
    return t;
  }
  static std::vector<int32_t> Ids(const Tensor& t) {
    return std::vector<int32_t>(t.i32(), t.i32() + t.numel());
  }
};

TEST_F(GatherSequencesTest, RowsAreTheWindowFromEachStartAndItsShiftByOne) {
  // tokens[i] = 100 + i, so every value names its position.
  std::vector<int32_t> split(13);
  std::iota(split.begin(), split.end(), 100);
  const Tensor tokens = I32(split);
  const Tensor starts = I32({9, 0, 4});  // the last row ends on the last token
  const Tensor inputs = Zeros({3 * 3}, DType::kI32), targets = Zeros({3 * 3}, DType::kI32);
  backend_.GatherSequences({.tokens = tokens, .starts = starts, .inputs = inputs,
                            .targets = targets, .time = 3});
  EXPECT_EQ(Ids(inputs), (std::vector<int32_t>{109, 110, 111, 100, 101, 102, 104, 105, 106}));
  EXPECT_EQ(Ids(targets), (std::vector<int32_t>{110, 111, 112, 101, 102, 103, 105, 106, 107}));
}

TEST_F(GatherSequencesTest, MatchesTrainBatchesHostBatchesAcrossEpochs) {
  // An odd split and shape; 40 batches of 3 rows is several epochs of the
  // 16 sequences of 7 + 1 tokens in 120 tokens, so reshuffles are covered.
  std::vector<uint16_t> split(120);
  for (size_t i = 0; i < split.size(); ++i) split[i] = static_cast<uint16_t>((i * 37) % 251);
  const int64_t rows = 3, time = 7;
  TrainBatches host(split, rows, time, TrainBatchSeed(5));
  TrainBatches device(split, rows, time, TrainBatchSeed(5));
  const Tensor tokens = I32(std::vector<int32_t>(split.begin(), split.end()));
  const Tensor starts = Zeros({rows}, DType::kI32);
  const Tensor inputs = Zeros({rows * time}, DType::kI32);
  const Tensor targets = Zeros({rows * time}, DType::kI32);
  std::vector<int32_t> want_inputs(rows * time), want_targets(rows * time);
  std::vector<int64_t> next(rows);
  for (int batch = 0; batch < 40; ++batch) {
    host.Next(want_inputs.data(), want_targets.data());
    device.NextStarts(next.data());
    for (int64_t r = 0; r < rows; ++r) starts.i32()[r] = static_cast<int32_t>(next[r]);
    backend_.GatherSequences({.tokens = tokens, .starts = starts, .inputs = inputs,
                              .targets = targets, .time = time});
    ASSERT_EQ(Ids(inputs), want_inputs) << "batch " << batch;
    ASSERT_EQ(Ids(targets), want_targets) << "batch " << batch;
  }
  EXPECT_GT(device.epochs(), 2.0);
  EXPECT_EQ(device.epochs(), host.epochs());
}

TEST_F(GatherSequencesTest, TheProfilerForwardsAndCountsIt) {
  ProfilingBackend profiler(backend_);
  const Tensor tokens = I32({1, 2, 3, 4});
  const Tensor starts = I32({1});
  const Tensor inputs = Zeros({2}, DType::kI32), targets = Zeros({2}, DType::kI32);
  profiler.BeginSteps();
  profiler.GatherSequences({.tokens = tokens, .starts = starts, .inputs = inputs,
                            .targets = targets, .time = 2});
  profiler.BeginOptimizer();
  profiler.EndOptimizer();
  EXPECT_EQ(Ids(inputs), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(Ids(targets), (std::vector<int32_t>{3, 4}));
  ASSERT_EQ(profiler.steps().size(), 1u);
  EXPECT_EQ(profiler.steps()[0].families[static_cast<int>(Op::kGatherSequences)].calls, 1);
}

TEST_F(GatherSequencesTest, StartWithoutRoomForItsSequenceDies) {
  const Tensor tokens = I32({1, 2, 3, 4, 5});
  const Tensor starts = I32({0, 2});  // 2 + 3 + 1 > 5
  const Tensor inputs = Zeros({6}, DType::kI32), targets = Zeros({6}, DType::kI32);
  EXPECT_DEATH(backend_.GatherSequences({.tokens = tokens, .starts = starts, .inputs = inputs,
                                         .targets = targets, .time = 3}),
               "start 2 of row 1");
}

}  // namespace
}  // namespace smallem
