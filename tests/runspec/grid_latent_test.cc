// Latent attention's grid keys (attention, kv_latent, rope_dim, q_latent):
// they reach the canonical spec only when latent is chosen, and impossible
// values are errors that name the file, the line and the key.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;

std::string LatentGrid(const std::string& variant) {
  return "name: latent\n"
         "data: data/demo\n"
         "base:\n"
         "  arch: modern\n"
         "  heads: 4\n"
         "  embed: 128\n"
         "budget: {steps: 10}\n"
         "seeds: [1]\n"
         "baseline: mha\n"
         "variants:\n"
         "  mha: {}\n"
         "  latent: " + variant + "\n";
}

TEST(GridLatentTest, LatentKeysReachTheSpecOnlyWhenChosen) {
  absl::StatusOr<Grid> grid = ParseGrid(
      LatentGrid("{attention: latent, kv_latent: 24, q_latent: 32, rope_dim: 8}"), "g.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json latent = nlohmann::json::parse(grid->FindVariant("latent")->spec_json);
  EXPECT_EQ(latent["attention"], "latent");
  EXPECT_EQ(latent["kv_latent"], 24);
  EXPECT_EQ(latent["q_latent"], 32);
  EXPECT_EQ(latent["rope_dim"], 8);
  const nlohmann::json mha = nlohmann::json::parse(grid->FindVariant("mha")->spec_json);
  EXPECT_FALSE(mha.contains("attention")) << "multi-head specs keep their hashes";
  EXPECT_FALSE(mha.contains("kv_latent"));
}

TEST(GridLatentTest, LatentWithoutKvLatentGetsAQuarterOfTheEmbedding) {
  absl::StatusOr<Grid> grid = ParseGrid(LatentGrid("{attention: latent}"), "g.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json latent = nlohmann::json::parse(grid->FindVariant("latent")->spec_json);
  EXPECT_EQ(latent["kv_latent"], 32);  // embed 128 / 4, named in the canonical spec
}

TEST(GridLatentTest, ImpossibleValuesNameTheLineAndTheKey) {
  absl::StatusOr<Grid> typo = ParseGrid(LatentGrid("{attention: mla}"), "g.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()),
              HasSubstr("g.yaml:12: unknown attention \"mla\" (expected mha or latent)"));
  absl::StatusOr<Grid> no_latent =
      ParseGrid(LatentGrid("{attention: latent, kv_latent: 0}"), "g.yaml");
  ASSERT_FALSE(no_latent.ok());
  EXPECT_THAT(std::string(no_latent.status().message()), HasSubstr("kv_latent must be positive"));
  absl::StatusOr<Grid> odd =
      ParseGrid(LatentGrid("{attention: latent, kv_latent: 24, rope_dim: 7}"), "g.yaml");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(std::string(odd.status().message()), HasSubstr("rope_dim 7 must be even"));
  absl::StatusOr<Grid> wide =
      ParseGrid(LatentGrid("{attention: latent, kv_latent: 24, rope_dim: 32}"), "g.yaml");
  ASSERT_FALSE(wide.ok());
  EXPECT_THAT(std::string(wide.status().message()), HasSubstr("below the head size"));
  absl::StatusOr<Grid> stray = ParseGrid(LatentGrid("{kv_latent: 24}"), "g.yaml");
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(std::string(stray.status().message()),
              HasSubstr("kv_latent 24 applies only with attention: latent"));
}

}  // namespace
}  // namespace smallem
