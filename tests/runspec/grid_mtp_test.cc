// Grid files with multi-token prediction: the keys reach the canonical spec
// (only when on), and impossible values are errors naming file, line and key.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;

std::string GridWith(const std::string& variant) {
  return R"(name: study
data: ../data/demo
base:
  arch: modern
  layers: 2
  heads: 2
  embed: 64
  context: 64
budget: {steps: 300}
seeds: [1, 2]
baseline: plain
variants:
  plain: {}
  )" + variant + "\n";
}

TEST(GridMtpTest, MtpKeysReachTheCanonicalSpecOnlyWhenOn) {
  absl::StatusOr<Grid> grid = ParseGrid(GridWith("mtp2: {mtp: 2, mtp_weight: 0.5}"), "g.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json on = nlohmann::json::parse(grid->FindVariant("mtp2")->spec_json);
  EXPECT_EQ(on["mtp"], 2);
  EXPECT_EQ(on["mtp_weight"], 0.5);
  const nlohmann::json plain = nlohmann::json::parse(grid->FindVariant("plain")->spec_json);
  EXPECT_FALSE(plain.contains("mtp"));
  // A weight without depths trains the plain model: the grid says so.
  absl::StatusOr<Grid> same = ParseGrid(GridWith("weight_only: {mtp_weight: 0.5}"), "g.yaml");
  ASSERT_FALSE(same.ok());
  EXPECT_THAT(same.status().message(), HasSubstr("same run spec as variant \"plain\""));
}

TEST(GridMtpTest, ImpossibleValuesNameTheKey) {
  for (const char* variant : {"bad: {mtp: -1}", "bad: {mtp: 64}", "bad: {mtp: two}",
                              "bad: {mtp: 1, mtp_weight: -0.3}"}) {
    absl::StatusOr<Grid> grid = ParseGrid(GridWith(variant), "g.yaml");
    ASSERT_FALSE(grid.ok()) << variant;
    EXPECT_THAT(grid.status().message(), HasSubstr("g.yaml:")) << variant;
    EXPECT_THAT(grid.status().message(), HasSubstr("mtp")) << grid.status();
  }
}

}  // namespace
}  // namespace smallem
