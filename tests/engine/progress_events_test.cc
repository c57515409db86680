#include "engine/train/progress_events.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

// The exact bytes the daemon, scripts and `train --json-progress` readers
// have always read.
TEST(ProgressEventsTest, ProgressLineKeepsItsFormat) {
  EXPECT_EQ(FormatProgressLine(TrainProgress{.step = 7, .total_steps = 20, .loss = 3.5,
                                             .tokens_per_s = 1000, .elapsed_s = 1.5,
                                             .eta_s = 2.5}),
            R"({"elapsed_s":1.5,"eta_s":2.5,"event":"progress","loss":3.5,"step":7,)"
            R"("tokens_per_s":1000.0,"total_steps":20})");
  EXPECT_EQ(FormatProgressLine(TrainProgress{.step = 1, .max_over_mean_load = 1.5,
                                             .tokens_per_expert = {2, 4}}),
            R"({"elapsed_s":0.0,"eta_s":0.0,"event":"progress","loss":0.0,)"
            R"("max_over_mean_load":1.5,"step":1,"tokens_per_expert":[2.0,4.0],)"
            R"("tokens_per_s":0.0,"total_steps":0})");
}

TEST(ProgressEventsTest, ProgressLineRoundTrips) {
  const TrainProgress p{.step = 10, .total_steps = 20, .loss = 3.25, .tokens_per_s = 512,
                        .elapsed_s = 4, .eta_s = 4, .max_over_mean_load = 1.25,
                        .tokens_per_expert = {96, 160}};
  std::optional<TrainProgress> back = ParseProgressLine(FormatProgressLine(p));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 10);
  EXPECT_EQ(back->total_steps, 20);
  EXPECT_DOUBLE_EQ(back->loss, 3.25);
  EXPECT_DOUBLE_EQ(back->tokens_per_s, 512);
  EXPECT_DOUBLE_EQ(back->elapsed_s, 4);
  EXPECT_DOUBLE_EQ(back->eta_s, 4);
  EXPECT_DOUBLE_EQ(back->max_over_mean_load, 1.25);
  EXPECT_EQ(back->tokens_per_expert, (std::vector<double>{96, 160}));
}

TEST(ProgressEventsTest, AMalformedLineIsRefused) {
  for (const char* line : {"", "step 3/10", "{\"event\":\"progress\"", "[1,2]",
                           R"({"step":3})", R"({"event":"checkpoint","step":3})",
                           R"({"event":7,"step":3})"}) {
    EXPECT_FALSE(ParseProgressLine(line).has_value()) << line;
  }
  // A checkpoint line needs its path, integer step and seconds.
  for (const char* line : {R"({"event":"checkpoint","step":3,"train_seconds":1.0})",
                           R"({"event":"checkpoint","path":"a","step":3.5,"train_seconds":1})",
                           R"({"event":"checkpoint","path":"a","step":3,"train_seconds":"1"})",
                           R"({"event":"progress","path":"a","step":3,"train_seconds":1})"}) {
    EXPECT_FALSE(ParseCheckpointLine(line).has_value()) << line;
  }
}

TEST(ProgressEventsTest, CheckpointLineRoundTripsAndIsNotProgress) {
  const std::string line = FormatCheckpointLine(
      CheckpointWritten{.path = "/tmp/run.ckpt", .steps = 30, .train_seconds = 2.5});
  EXPECT_EQ(line, R"({"event":"checkpoint","path":"/tmp/run.ckpt","step":30,"train_seconds":2.5})");
  std::optional<CheckpointWritten> back = ParseCheckpointLine(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->path, "/tmp/run.ckpt");
  EXPECT_EQ(back->steps, 30);
  EXPECT_DOUBLE_EQ(back->train_seconds, 2.5);
  EXPECT_FALSE(ParseProgressLine(line).has_value());
}

TEST(ProgressEventsTest, ResultLineWrapsTheResult) {
  EXPECT_EQ(FormatResultLine(nlohmann::json{{"val_nats_per_byte", 1.5}}),
            R"({"event":"result","result":{"val_nats_per_byte":1.5}})");
  EXPECT_FALSE(ParseProgressLine(FormatResultLine(nlohmann::json::object())).has_value());
}

}  // namespace
}  // namespace smallem
