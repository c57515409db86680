// The article-16 cache grids (examples/article16-cache*.yaml): they parse,
// carry own_keys and passes into their variants' run specs, and have a
// reference curve through the baseline; own_keys past the layers is an
// error naming the file, the line and the key.
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/analysis/equal_steps.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& name) {
  std::ifstream in(std::string(SMALLEM_SOURCE_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CacheExamplesTest, BothGridsParseWithTheirOptions) {
  for (const char* name : {"examples/article16-cache.yaml", "examples/article16-cache-cpu.yaml"}) {
    const std::string text = Read(name);
    ASSERT_FALSE(text.empty()) << name;
    absl::StatusOr<Grid> grid = ParseGrid(text, name);
    ASSERT_TRUE(grid.ok()) << grid.status();
    ASSERT_NE(grid->FindVariant("passes2"), nullptr) << name;
    const nlohmann::json passes = nlohmann::json::parse(grid->FindVariant("passes2")->spec_json);
    EXPECT_EQ(passes["passes"], 2) << name;
    const nlohmann::json mha = nlohmann::json::parse(grid->FindVariant("mha")->spec_json);
    EXPECT_FALSE(mha.contains("own_keys")) << name;
    const ComparisonPlan plan = ComparisonPlan::ForGrid(*grid);
    ASSERT_TRUE(plan.reference.has_value()) << name;
    EXPECT_EQ(plan.reference->shared_variant, "mha") << name;
  }
  absl::StatusOr<Grid> full = ParseGrid(Read("examples/article16-cache.yaml"), "a.yaml");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(nlohmann::json::parse(full->FindVariant("own-keys4")->spec_json)["own_keys"], 4);
  EXPECT_EQ(nlohmann::json::parse(full->FindVariant("own-keys2")->spec_json)["own_keys"], 2);
}

TEST(CacheExamplesTest, OwnKeysPastTheLayersNamesTheKey) {
  absl::StatusOr<Grid> grid = ParseGrid(R"(name: bad
data: d
base: {layers: 2}
budget: {steps: 10}
seeds: [1]
baseline: a
variants:
  a: {}
  b: {own_keys: 3}
)", "bad.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_THAT(grid.status().message(), HasSubstr("own_keys"));
  EXPECT_THAT(grid.status().message(), HasSubstr("bad.yaml"));
}

}  // namespace
}  // namespace smallem
