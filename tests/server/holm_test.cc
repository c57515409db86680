// Holm's correction (server/analysis/holm.h): the levels by hand, and a grid
// with `holm: true` against the same runs without it, on fixture databases.
#include "server/analysis/holm.h"

#include <cmath>
#include <string>

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

// k = 4, sorted p: 0.01 ≤ 0.05/4 rejected; 0.03 > 0.05/3 stops; the rest
// keep 0.05/3.
TEST(HolmTest, LevelsStepDownUntilTheFirstThatIsNotRejected) {
  const std::vector<double> levels = HolmLevels({0.04, 0.01, 0.5, 0.03}, 0.05);
  ASSERT_EQ(levels.size(), 4u);
  EXPECT_DOUBLE_EQ(levels[1], 0.05 / 4);
  EXPECT_DOUBLE_EQ(levels[3], 0.05 / 3);
  EXPECT_DOUBLE_EQ(levels[0], 0.05 / 3);
  EXPECT_DOUBLE_EQ(levels[2], 0.05 / 3);
}

TEST(HolmTest, AllRejectedReachAlphaAndAMissingPCountsAsOne) {
  const std::vector<double> levels = HolmLevels({0.001, std::nullopt, 0.002}, 0.05);
  EXPECT_DOUBLE_EQ(levels[0], 0.05 / 3);
  EXPECT_DOUBLE_EQ(levels[2], 0.05 / 2);
  EXPECT_DOUBLE_EQ(levels[1], 0.05);
}

TEST(HolmTest, TwoSidedPIsTheTTail) {
  EXPECT_NEAR(TwoSidedP(2.7764451, 1, 4), 0.05, 1e-7);
  EXPECT_NEAR(TwoSidedP(-2.7764451, 1, 4), 0.05, 1e-7);
}

// Three variants, two seeds each, s² = 5e-5 in every arm: σ = 0.0070711
// (df 4), SE = σ, τ = t₀.₉₇₅(4)·σ = 0.0196324.
//   a  Δ = −0.025: t = 3.5355, p = 0.02411 — better (1.27τ) at 5 %, but the
//      smallest of three p values must pass 0.05/3 = 0.01667: under Holm
//      τ = t_{1−0.05/6}(4)·σ = 3.9607865·σ = 0.0280070 > 0.025, undecided.
//   b  Δ = 0, c  Δ = +0.001: undecided either way.
constexpr char kGrid[] = R"(name: family
data: data/tiny
base: {layers: 1, heads: 2, embed: 16, context: 16, batch: 2}
budget: {steps: 100}
seeds: [1, 2]
baseline: base
variants:
  base: {}
  a: {lr: 0.002}
  b: {lr: 0.004}
  c: {layers: 2}
)";
constexpr char kHolmGrid[] = R"(name: family-holm
data: data/tiny
base: {layers: 1, heads: 2, embed: 16, context: 16, batch: 2}
budget: {steps: 100}
seeds: [1, 2]
baseline: base
holm: true
variants:
  base: {}
  a: {lr: 0.002}
  b: {lr: 0.004}
  c: {layers: 2}
)";
const Losses kLosses = {{{"base", 1}, 1.000}, {{"base", 2}, 1.010},
                        {{"a", 1}, 0.975},    {{"a", 2}, 0.985},
                        {{"b", 1}, 1.000},    {{"b", 2}, 1.010},
                        {{"c", 1}, 1.001},    {{"c", 2}, 1.011}};

using HolmReportTest = testing::ReportFixture;

TEST_F(HolmReportTest, WithoutHolmTheReportStatesTheFamily) {
  const json j = json::parse(Report(kGrid, kLosses, ReportFormat::kJson));
  const json& a = RowOf(j["rows"], "a");
  EXPECT_EQ(a["verdict_text"], "better (1.27τ)");
  EXPECT_NEAR(a["tau"].get<double>(), 0.0196324, 1e-6);
  EXPECT_DOUBLE_EQ(a["alpha"].get<double>(), 0.05);
  EXPECT_EQ(j["family"]["variants"], 3);
  EXPECT_FALSE(j["family"]["holm"].get<bool>());
  EXPECT_NEAR(j["family"]["expected_false_verdicts"].get<double>(), 0.15, 1e-12);
  const std::string table = Render("family", ReportFormat::kTable);
  EXPECT_THAT(table, HasSubstr("3 variants compared at α = 0.05 each: if none differs, 0.15 "
                               "false better/worse verdicts are expected"));
}

TEST_F(HolmReportTest, HolmRaisesTheBarOfTheSmallestP) {
  const json j = json::parse(Report(kHolmGrid, kLosses, ReportFormat::kJson));
  const json& a = RowOf(j["rows"], "a");
  EXPECT_EQ(a["verdict"], "undecided");
  EXPECT_NEAR(a["alpha"].get<double>(), 0.05 / 3, 1e-12);
  EXPECT_NEAR(a["tau"].get<double>(), 3.9607865 * std::sqrt(5e-5), 1e-6);
  // The step-down stopped at a: b and c keep its level.
  EXPECT_NEAR(RowOf(j["rows"], "b")["alpha"].get<double>(), 0.05 / 3, 1e-12);
  EXPECT_TRUE(j["family"]["holm"].get<bool>());
  EXPECT_TRUE(j["family"]["expected_false_verdicts"].is_null());
  EXPECT_THAT(Render("family-holm", ReportFormat::kTable),
              HasSubstr("3 variants compared with Holm's correction (holm: true)"));
}

}  // namespace
}  // namespace smallem
