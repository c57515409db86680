// Sequential seeds in a grid file: `seeds: {start: [...], max: N, looks: [...]}`
// (runspec/grid.h SeedSchedule), its errors, and its keeping with the
// experiment in the store.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;

constexpr char kGrid[] = R"(name: seq
data: ../data/demo
base: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4}
budget: {steps: 20}
seeds: {start: [1, 2, 3], max: 10, looks: [3, 5, 10]}
baseline: baseline
variants:
  baseline: {}
  rope: {positions: rope}
)";

std::string WithSeeds(const std::string& seeds) {
  std::string text = kGrid;
  const std::string line = "seeds: {start: [1, 2, 3], max: 10, looks: [3, 5, 10]}";
  return text.replace(text.find(line), line.size(), seeds);
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<Grid> grid = ParseGrid(text, "seq.yaml");
  EXPECT_FALSE(grid.ok()) << text;
  if (grid.ok()) return "";
  EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(grid.status().message());
}

TEST(GridSeedsTest, ScheduleIsParsedAndOnlyTheStartSeedsAreCells) {
  absl::StatusOr<Grid> grid = ParseGrid(kGrid, "seq.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_TRUE(grid->sequential.has_value());
  EXPECT_EQ(grid->sequential->start, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(grid->sequential->max, 10);
  EXPECT_EQ(grid->sequential->looks, (std::vector<int>{3, 5, 10}));
  EXPECT_EQ(grid->seeds, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(grid->Cells().size(), 6u);  // 3 seeds × 2 variants
  EXPECT_EQ(grid->RunCountBound(), 20);  // max 10 × 2 variants
}

TEST(GridSeedsTest, PlainListKeepsItsMeaning) {
  absl::StatusOr<Grid> grid = ParseGrid(WithSeeds("seeds: [1, 2]"), "seq.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_FALSE(grid->sequential.has_value());
  EXPECT_EQ(grid->Cells().size(), 4u);
}

TEST(GridSeedsTest, SeedsAfterTheStartFollowItsLargest) {
  SeedSchedule s{.start = {7, 3}, .max = 5, .looks = {2, 5}};
  EXPECT_EQ(s.SeedsUpTo(2), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(s.SeedsUpTo(5), (std::vector<int64_t>{7, 3, 8, 9, 10}));
}

TEST(GridSeedsTest, ScheduleJsonRoundTrips) {
  SeedSchedule s{.start = {1, 2}, .max = 6, .looks = {2, 4, 6}};
  absl::StatusOr<SeedSchedule> back = SeedSchedule::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->start, s.start);
  EXPECT_EQ(back->max, s.max);
  EXPECT_EQ(back->looks, s.looks);
  EXPECT_FALSE(SeedSchedule::FromJson("{\"start\": [1]}").ok());
  EXPECT_FALSE(SeedSchedule::FromJson("not json").ok());
}

TEST(GridSeedsErrorTest, LooksMustIncrease) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2, 3], max: 10, looks: [3, 5, 5]}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"looks\": looks must increase (5 follows 5)"));
}

TEST(GridSeedsErrorTest, FirstLookIsTheStartSeeds) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2, 3], max: 10, looks: [4, 10]}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"looks\": the first look is at the 3 start seeds"));
}

TEST(GridSeedsErrorTest, LastLookIsAtMostMax) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2, 3], max: 8, looks: [3, 10]}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"looks\": the last look, 10 seeds, is past max: 8"));
}

TEST(GridSeedsErrorTest, MaxBelowTheStartSeeds) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2, 3], max: 2, looks: [3]}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"max\": 2 is fewer than the 3 start seeds"));
}

TEST(GridSeedsErrorTest, OneStartSeedDoesNotMeasureTheNoise) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1], max: 4, looks: [1, 4]}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"start\": sequential seeds start with at least 2"));
}

TEST(GridSeedsErrorTest, MissingKeyNamesIt) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2], max: 4}"));
  EXPECT_THAT(m, HasSubstr("seq.yaml:5: \"seeds\": missing \"looks\""));
}

TEST(GridSeedsErrorTest, UnknownKeySuggestsTheNearest) {
  const std::string m = ErrorOf(WithSeeds("seeds: {start: [1, 2], max: 4, look: [2, 4]}"));
  EXPECT_THAT(m, HasSubstr("unknown key \"look\" in seeds (did you mean \"looks\"?)"));
}

TEST(GridSeedsErrorTest, BadValuesNameTheirKey) {
  EXPECT_THAT(ErrorOf(WithSeeds("seeds: {start: [1, 1], max: 4, looks: [2, 4]}")),
              HasSubstr("\"start\": seed 1 is listed twice"));
  EXPECT_THAT(ErrorOf(WithSeeds("seeds: {start: [1, 2], max: many, looks: [2, 4]}")),
              HasSubstr("\"max\": expected the most seeds per arm"));
  EXPECT_THAT(ErrorOf(WithSeeds("seeds: {start: [1, 2], max: 4, looks: 4}")),
              HasSubstr("\"looks\": expected a non-empty list of seed counts"));
  EXPECT_THAT(ErrorOf(WithSeeds("seeds: {start: [1, 2], max: 4, looks: [2, x]}")),
              HasSubstr("\"looks\": expected a number of seeds per arm, got \"x\""));
}

TEST(GridSeedsStoreTest, ScheduleIsKeptWithTheExperimentAndUpdatedOnResubmission) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir.Join("s.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  SubmissionRecord sub = testing::MakeSubmission("exp", 2, 2);
  sub.seed_schedule = SeedSchedule{.start = {1, 2}, .max = 4, .looks = {2, 4}}.ToJson();
  ASSERT_TRUE((*store)->Submit(sub, 1).ok());
  store->reset();
  store = SqliteStore::Open(dir.Join("s.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<ExperimentRecord> e = (*store)->FindExperiment("exp");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->seed_schedule, sub.seed_schedule);
  sub.seed_schedule = "";
  ASSERT_TRUE((*store)->Submit(sub, 2).ok());
  e = (*store)->FindExperiment("exp");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->seed_schedule, "");
}

}  // namespace
}  // namespace smallem
