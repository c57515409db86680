// The four outcomes (server/analysis/verdict.h) on fixture databases
// (tests/server/report_fixture.h), checked against hand-computed rows.
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/analysis/distributions.h"
#include "tests/server/report_fixture.h"

namespace smallem {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::Losses;
using testing::RowOf;

// Two seeds per arm, s² = 5e-7 in each: pooled σ = 0.00070711 (df 4);
// SE = σ·√(1/2 + 1/2) = σ; t₀.₉₇₅(4)·SE = 2.7764451·σ = 0.0019632 < floor,
// so τ = 0.002; t₀.₉₅(4)·SE = 2.1318468·σ = 0.0015074.
//   same  Δ = 0:       90 % interval [−0.0015074, +0.0015074] ⊂ (−0.002, +0.002): equivalent
//   near  Δ = +0.001:  90 % interval [−0.0005074, +0.0025074]: undecided;
//         missable = 0.001 + 0.0019632 = 0.0029632; seeds to decide: the
//         smallest n with 0.001 + (t₀.₉₅(2n−2) + 0.8416)·σ·√(2/n) < 0.002:
//         n = 6 gives 0.0020835, n = 7 gives 0.0019917, so 7;
//         seeds to resolve the floor 3 (t₀.₉₇₅(4)·σ·√(2/3) = 0.0016030),
//         range 2–40 over s·√(2/χ²₀.₉₇₅(2)) … s·√(2/χ²₀.₀₂₅(2)).
//   far   Δ = −0.010:  better (5.00τ), Δ/τ = −5.
constexpr char kFourGrid[] = R"(name: four
data: data/tiny
base: {layers: 1, heads: 2, embed: 16, context: 16, batch: 2}
budget: {steps: 100}
seeds: [1, 2]
baseline: base
variants:
  base: {}
  same: {lr: 0.002}
  near: {lr: 0.004}
  far: {layers: 2}
)";

// One seed: the noise is not measured, so nothing is decided.
constexpr char kOneSeedGrid[] = R"(name: one-seed
data: data/tiny
base: {layers: 1, heads: 2, embed: 16, context: 16, batch: 2}
budget: {steps: 100}
seeds: [1]
baseline: base
variants:
  base: {}
  far: {layers: 2}
)";

// Noise above the floor: base 1.000/1.010 (s² = 5e-5), wide 1.004/1.016
// (7.2e-5): σ² = 6.1e-5 (df 2), SE = σ = 0.0078102, τ = t₀.₉₇₅(2)·SE =
// 4.3026527·0.0078102 = 0.0336048; Δ = +0.005: undecided, effects up to
// 0.005 + 0.0336048 = 0.0386 not ruled out.
constexpr char kWideGrid[] = R"(name: wide
data: data/tiny
base: {layers: 1, heads: 2, embed: 16, context: 16, batch: 2}
budget: {steps: 100}
seeds: [1, 2]
baseline: base
variants:
  base: {}
  wide: {lr: 0.004}
)";

const Losses kFour = {{{"base", 1}, 1.000}, {{"base", 2}, 1.001},
                      {{"same", 1}, 1.000}, {{"same", 2}, 1.001},
                      {{"near", 1}, 1.001}, {{"near", 2}, 1.002},
                      {{"far", 1}, 0.990},  {{"far", 2}, 0.991}};

using FourOutcomesTest = testing::ReportFixture;

TEST_F(FourOutcomesTest, EquivalentUndecidedAndBetterRowsEqualHandComputedValues) {
  const json j = json::parse(Report(kFourGrid, kFour, ReportFormat::kJson));
  const double sigma = std::sqrt(5e-7);

  const json& same = RowOf(j["rows"], "same");
  EXPECT_EQ(same["verdict"], "equivalent");
  EXPECT_EQ(same["verdict_text"], "equivalent (within ±0.0020)");
  EXPECT_NEAR(same["tost_low"].get<double>(), -2.1318468 * sigma, 1e-7);
  EXPECT_NEAR(same["tost_high"].get<double>(), 2.1318468 * sigma, 1e-7);
  EXPECT_TRUE(same["missable_effect"].is_null());

  const json& near = RowOf(j["rows"], "near");
  EXPECT_EQ(near["verdict"], "undecided");
  EXPECT_NEAR(near["tau"].get<double>(), 0.002, 1e-12);
  EXPECT_NEAR(near["tost_high"].get<double>(), 0.001 + 2.1318468 * sigma, 1e-7);
  EXPECT_NEAR(near["missable_effect"].get<double>(), 0.001 + 2.7764451 * sigma, 1e-7);
  EXPECT_EQ(near["seeds_to_decide"], 7);
  EXPECT_EQ(near["verdict_text"],
            "undecided: effects up to 0.0030 not ruled out; ~7 seeds per arm would decide");

  const json& far = RowOf(j["rows"], "far");
  EXPECT_EQ(far["verdict_text"], "better (5.00τ)");
  // Δ/τ keeps Δ's sign.
  EXPECT_NEAR(far["delta_over_tau"].get<double>(), -5.0, 1e-9);
  EXPECT_NEAR(far["delta"].get<double>(), -0.010, 1e-12);

  // From two seeds, the seeds to resolve the floor with their range.
  const json& noise_near = RowOf(j["noise"]["rows"], "near");
  EXPECT_EQ(noise_near["seeds_to_resolve"], 3);
  EXPECT_EQ(noise_near["seeds_to_resolve_low"], 2);
  EXPECT_EQ(noise_near["seeds_to_resolve_high"], 40);
}

TEST_F(FourOutcomesTest, TableNamesTheFourOutcomesAndNeverWithinNoise) {
  const std::string table = Report(kFourGrid, kFour, ReportFormat::kTable);
  EXPECT_THAT(table, HasSubstr("equivalent (within ±0.0020)"));
  EXPECT_THAT(table, HasSubstr("undecided: effects up to 0.0030 not ruled out"));
  EXPECT_THAT(table, HasSubstr("better (5.00τ)"));
  EXPECT_THAT(table, HasSubstr("3 (2–40)"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("within noise")));
}

TEST_F(FourOutcomesTest, OneSeedIsUndecidedBecauseTheNoiseIsNotMeasured) {
  const std::string text = Report(kOneSeedGrid, {{{"base", 1}, 1.000}, {{"far", 1}, 0.900}},
                                  ReportFormat::kJson);
  const json j = json::parse(text);
  const json& far = RowOf(j["rows"], "far");
  // Δ = −0.1 is 50 floors, yet nothing says how much one seed moves it.
  EXPECT_EQ(far["verdict"], "undecided");
  EXPECT_EQ(far["verdict_text"], "undecided: noise not measured");
  bool says_how_many = false;
  for (const json& note : j["notes"]) {
    says_how_many |= note.get<std::string>().find("two seeds per arm measure it") !=
                     std::string::npos;
  }
  EXPECT_TRUE(says_how_many) << j["notes"];
}

TEST_F(FourOutcomesTest, DocumentedTauFormulaReproducesThePrintedTau) {
  const Losses losses = {{{"base", 1}, 1.000}, {{"base", 2}, 1.010},
                         {{"wide", 1}, 1.004}, {{"wide", 2}, 1.016}};
  const json j = json::parse(Report(kWideGrid, losses, ReportFormat::kJson));
  // docs/equal-time.md § The comparison: pooled SE = σ·√(1/n_V + 1/n_B),
  // ν = df of σ, τ = max(floor, t₀.₉₇₅(ν)·SE).
  const double sigma = j["noise_model"]["sigma"].get<double>();
  const int df = j["noise_model"]["df"].get<int>();
  const double tau = std::max(0.002, StudentTQuantile(0.975, df) * sigma * std::sqrt(1.0));
  EXPECT_NEAR(tau, 0.0336048, 1e-6);
  const std::string table = Render("wide", ReportFormat::kTable);
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("%.4f", tau)));
  const json& wide = RowOf(j["rows"], "wide");
  EXPECT_NEAR(wide["tau"].get<double>(), tau, 1e-12);
  EXPECT_EQ(wide["verdict_text"],
            "undecided: effects up to 0.0386 not ruled out; ~40 seeds per arm would decide");
}

}  // namespace
}  // namespace smallem
