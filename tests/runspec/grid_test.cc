#include "runspec/grid.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

using ::testing::HasSubstr;

// A complete, valid grid; tests edit one line of it at a time.
constexpr char kDemo[] = R"(name: demo
data: ../data/demo
base:
  arch: gpt2
  layers: 2
  heads: 2
  embed: 64
  context: 64
  batch: 8
  optimizer: adamw
  lr: 0.003
budget: {steps: 300}
seeds: [1, 2]
baseline: baseline
variants:
  baseline: {}
  rope: {positions: rope}
  rms:
    norm: rms
)";

absl::StatusOr<Grid> Parse(const std::string& text) {
  return ParseGrid(text, "examples/demo.yaml");
}

// Replaces the first occurrence of `from` in the demo grid.
std::string Demo(const std::string& from, const std::string& to) {
  std::string text = kDemo;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// The error of parsing `text`; fails the test when it parses.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<Grid> grid = Parse(text);
  EXPECT_FALSE(grid.ok()) << "parsed:\n" << text;
  if (grid.ok()) return "";
  EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(grid.status().message());
}

// The repository root (the build defines it: __FILE__ may be relative under
// ccache's base_dir).
std::string SourceRoot() { return std::string(SMALLEM_SOURCE_DIR) + "/"; }

nlohmann::json SpecOf(const Grid& grid, const std::string& variant) {
  const GridVariant* v = grid.FindVariant(variant);
  EXPECT_NE(v, nullptr) << variant;
  return v ? nlohmann::json::parse(v->spec_json) : nlohmann::json();
}

// ---- What a valid grid becomes -------------------------------------------

TEST(GridTest, DemoGridParsesIntoNamedVariantsInFileOrder) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->name, "demo");
  EXPECT_EQ(grid->file_name, "examples/demo.yaml");
  EXPECT_EQ(grid->baseline, "baseline");
  EXPECT_EQ(grid->seeds, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(grid->budget.steps, 300);
  EXPECT_FALSE(grid->budget.minutes.has_value());
  ASSERT_EQ(grid->variants.size(), 3u);
  EXPECT_EQ(grid->variants[0].name, "baseline");
  EXPECT_EQ(grid->variants[1].name, "rope");
  EXPECT_EQ(grid->variants[2].name, "rms");
  EXPECT_EQ(grid->variants[1].line, 17);
  EXPECT_FALSE(grid->reference.has_value());
}

TEST(GridTest, RelativeDataIsResolvedAgainstTheGridFilesDirectory) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->data, "../data/demo");
  EXPECT_EQ(grid->data_dir, "data/demo");
}

TEST(GridTest, AbsoluteDataIsKeptAsWritten) {
  absl::StatusOr<Grid> grid = Parse(Demo("data: ../data/demo", "data: /srv/data/demo/"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->data_dir, "/srv/data/demo");
}

TEST(GridTest, VariantSpecMergesOverridesOnTheBase) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json rope = SpecOf(*grid, "rope");
  EXPECT_EQ(rope["positions"], "rope");
  EXPECT_EQ(rope["norm"], "layer");
  EXPECT_EQ(rope["layers"], 2);
  EXPECT_EQ(rope["embed"], 64);
  EXPECT_DOUBLE_EQ(rope["lr"].get<double>(), 0.003);
  EXPECT_EQ(SpecOf(*grid, "rms")["norm"], "rms");
  EXPECT_EQ(SpecOf(*grid, "baseline")["positions"], "learned");
}

TEST(GridTest, SpecJsonLeavesOutDataSeedAndBudget) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  for (const GridVariant& v : grid->variants) {
    const nlohmann::json spec = nlohmann::json::parse(v.spec_json);
    for (const char* key : {"data", "seed", "steps", "minutes"}) {
      EXPECT_FALSE(spec.contains(key)) << v.name << " has " << key;
    }
  }
}

TEST(GridTest, SpecHashIsTheSha256OfTheCanonicalJson) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  for (const GridVariant& v : grid->variants) {
    EXPECT_EQ(v.spec_hash, Sha256Hex(v.spec_json));
    EXPECT_EQ(v.spec_hash.size(), 64u);
  }
}

TEST(GridTest, SpecHashIgnoresKeyOrderAndSpelling) {
  absl::StatusOr<Grid> a = Parse(kDemo);
  absl::StatusOr<Grid> b = Parse(Demo("  lr: 0.003\n", "  lr: 3e-3\n"));
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<Grid> c = Parse(Demo("  arch: gpt2\n  layers: 2\n", "  layers: 2\n  arch: gpt2\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(a->variants[1].spec_hash, b->variants[1].spec_hash);
  EXPECT_EQ(a->variants[1].spec_hash, c->variants[1].spec_hash);
}

TEST(GridTest, ResubmittingTheSameGridGivesTheSameCells) {
  absl::StatusOr<Grid> a = Parse(kDemo);
  absl::StatusOr<Grid> b = Parse(std::string("# a comment\n") + kDemo);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<Cell> ca = a->Cells(), cb = b->Cells();
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i) {
    EXPECT_EQ(ca[i].spec_hash, cb[i].spec_hash);
    EXPECT_EQ(ca[i].seed, cb[i].seed);
  }
}

TEST(GridTest, CellsAreEveryVariantAtEverySeedSeedMajor) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const std::vector<Cell> cells = grid->Cells();
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[0].variant, "baseline");
  EXPECT_EQ(cells[0].seed, 1);
  EXPECT_EQ(cells[2].variant, "rms");
  EXPECT_EQ(cells[3].variant, "baseline");
  EXPECT_EQ(cells[3].seed, 2);
  for (const Cell& c : cells) {
    EXPECT_EQ(c.kind, CellKind::kVariant);
    EXPECT_EQ(c.budget.steps, 300);
    EXPECT_EQ(c.spec_hash, grid->FindVariant(c.variant)->spec_hash);
  }
}

TEST(GridTest, AllSeedsOfAVariantShareOneSpecHash) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  std::set<std::string> rope_hashes;
  for (const Cell& c : grid->Cells()) {
    if (c.variant == "rope") rope_hashes.insert(c.spec_hash);
  }
  EXPECT_EQ(rope_hashes.size(), 1u);
}

TEST(GridTest, RunSpecForACellAddsDataSeedAndBudget) {
  absl::StatusOr<Grid> grid = Parse(kDemo);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const Cell cell = grid->Cells()[4];  // rope, seed 2
  ASSERT_EQ(cell.variant, "rope");
  const RunSpec spec = grid->RunSpecFor(cell);
  EXPECT_EQ(spec.data, "data/demo");
  EXPECT_EQ(spec.seed, 2);
  EXPECT_EQ(spec.budget.steps, 300);
  EXPECT_EQ(spec.architecture.positions, PositionKind::kRope);
  EXPECT_EQ(spec.embed, 64);
}

TEST(GridTest, AxesExpandToTheCartesianProductNamedByTheirValues) {
  absl::StatusOr<Grid> grid = Parse(R"(name: sweep
data: data/demo
base: {layers: 2, heads: 2, embed: 64, context: 64}
budget: {steps: 100}
seeds: [1, 2]
baseline: lr=0.003,norm=layer
grid:
  lr: [0.001, 0.003]
  norm: [layer, rms]
)");
  ASSERT_TRUE(grid.ok()) << grid.status();
  std::vector<std::string> names;
  for (const GridVariant& v : grid->variants) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lr=0.001,norm=layer", "lr=0.001,norm=rms",
                                             "lr=0.003,norm=layer", "lr=0.003,norm=rms"}));
  EXPECT_DOUBLE_EQ(SpecOf(*grid, "lr=0.001,norm=rms")["lr"].get<double>(), 0.001);
  EXPECT_EQ(SpecOf(*grid, "lr=0.001,norm=rms")["norm"], "rms");
  EXPECT_EQ(grid->Cells().size(), 8u);
}

TEST(GridTest, AxesComeAfterNamedVariants) {
  absl::StatusOr<Grid> grid =
      Parse(Demo("  rms:\n    norm: rms\n", "  rms:\n    norm: rms\ngrid:\n  lr: [0.001]\n"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->variants.size(), 4u);
  EXPECT_EQ(grid->variants[3].name, "lr=0.001");
}

TEST(GridTest, PresetInAVariantResetsTheBasesArchitecturePieces) {
  absl::StatusOr<Grid> grid =
      Parse(Demo("  arch: gpt2\n", "  arch: gpt2\n  norm: layer\n")
                .append("  modern: {arch: modern}\n"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  const nlohmann::json modern = SpecOf(*grid, "modern");
  EXPECT_EQ(modern["norm"], "rms");
  EXPECT_EQ(modern["feed_forward"], "swiglu");
  EXPECT_EQ(modern["positions"], "rope");
  EXPECT_EQ(modern["bias"], false);
}

TEST(GridTest, MinutesBudgetIsParsed) {
  absl::StatusOr<Grid> grid = Parse(Demo("budget: {steps: 300}", "budget: {minutes: 2.5}"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->budget.minutes, 2.5);
  EXPECT_FALSE(grid->budget.steps.has_value());
  EXPECT_EQ(BudgetKey(grid->budget), "minutes:2.5");
}

TEST(GridTest, BudgetKeyAndLabelNameTheBudget) {
  EXPECT_EQ(BudgetKey(Budget{.steps = 300, .minutes = std::nullopt}), "steps:300");
  EXPECT_EQ(BudgetLabel(Budget{.steps = 300, .minutes = std::nullopt}), "300 steps");
  EXPECT_EQ(BudgetLabel(Budget{.steps = std::nullopt, .minutes = 2}), "2 min");
}

TEST(GridTest, ReferenceCurveTrainsTheBaselineWithItsOverridesAtEachBudget) {
  absl::StatusOr<Grid> grid = Parse(std::string(kDemo) +
                                    "reference:\n"
                                    "  optimizer: adamw\n"
                                    "  lr: 0.002\n"
                                    "  budgets: {steps: [150, 300, 600]}\n"
                                    "  seeds: [1]\n");
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_TRUE(grid->reference.has_value());
  EXPECT_EQ(grid->reference->seeds, (std::vector<int64_t>{1}));
  ASSERT_EQ(grid->reference->budgets.size(), 3u);
  EXPECT_EQ(grid->reference->budgets[2].steps, 600);
  const nlohmann::json spec = nlohmann::json::parse(grid->reference->spec_json);
  EXPECT_DOUBLE_EQ(spec["lr"].get<double>(), 0.002);
  EXPECT_EQ(spec["embed"], 64);
  const std::vector<Cell> cells = grid->Cells();
  ASSERT_EQ(cells.size(), 9u);
  EXPECT_EQ(cells[6].kind, CellKind::kReference);
  EXPECT_EQ(cells[6].variant, "reference");
  EXPECT_EQ(cells[6].budget.steps, 150);
  EXPECT_EQ(cells[8].budget.steps, 600);
}

TEST(GridTest, ReferenceCellEqualToABaselineCellIsListedOnce) {
  // Same spec as the baseline: its 300-step seed-1 run is the baseline's.
  absl::StatusOr<Grid> grid = Parse(std::string(kDemo) +
                                    "reference:\n"
                                    "  budgets: {steps: [150, 300, 600]}\n"
                                    "  seeds: [1]\n");
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->reference->spec_hash, grid->FindVariant("baseline")->spec_hash);
  const std::vector<Cell> cells = grid->Cells();
  ASSERT_EQ(cells.size(), 8u);
  std::set<std::string> keys;
  for (const Cell& c : cells) {
    EXPECT_TRUE(keys.insert(c.spec_hash + "/" + std::to_string(c.seed) + "/" +
                            BudgetKey(c.budget)).second);
  }
}

TEST(GridTest, ReferenceSeedsDefaultToTheGridsSeeds) {
  absl::StatusOr<Grid> grid =
      Parse(std::string(kDemo) + "reference:\n  budgets: {minutes: [1, 2.5]}\n");
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->reference->seeds, grid->seeds);
  EXPECT_EQ(grid->reference->budgets[1].minutes, 2.5);
}

TEST(GridTest, ReferenceOfAnAxisBaselineKeepsTheAxisValues) {
  absl::StatusOr<Grid> grid = Parse(R"(name: sweep
data: data/demo
base: {layers: 2, heads: 2, embed: 64, context: 64}
budget: {steps: 100}
seeds: [1]
baseline: lr=0.001
grid:
  lr: [0.001, 0.003]
reference:
  budgets: {steps: [50, 100, 200]}
)");
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->reference->spec_hash, grid->FindVariant("lr=0.001")->spec_hash);
}

// A grid file of the repository (examples/…), parsed.
absl::StatusOr<Grid> ParseExample(const std::string& name) {
  std::ifstream in(SourceRoot() + name);
  if (!in.good()) return absl::NotFoundError(name);
  std::stringstream text;
  text << in.rdbuf();
  return ParseGrid(text.str(), name);
}

TEST(GridTest, ExampleGridsParse) {
  for (const char* name : {"examples/demo.yaml", "examples/article12.yaml",
                           "examples/article16-moe-mtp.yaml",
                           "examples/article16-moe-mtp-cpu.yaml"}) {
    absl::StatusOr<Grid> grid = ParseExample(name);
    ASSERT_TRUE(grid.ok()) << grid.status();
    EXPECT_GE(grid->variants.size(), 3u) << name;
    EXPECT_GE(grid->seeds.size(), 2u) << name;
  }
}

TEST(GridTest, DemoGridComparesAtEqualStepsAndAtEqualTime) {
  // What the demo must show without training it: RoPE and RMSNorm against
  // GPT-2, a variant whose point is time (another optimizer: its step costs
  // more), sequential seeds (two, then a third where a comparison is open:
  // the demo's runs stay near 2 minutes), and a reference curve of the
  // baseline's own spec whose budgets bracket the variants' budget (one
  // below, the budget itself run once for both, and above it by more than
  // Muon's step costs over AdamW's, ~1.25× measured: docs/benchmarks.md §
  // The demo's runs).
  absl::StatusOr<Grid> grid = ParseExample("examples/demo.yaml");
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->seeds, (std::vector<int64_t>{1, 2}));
  ASSERT_TRUE(grid->sequential.has_value()) << "the demo spends seeds where a verdict is open";
  EXPECT_EQ(grid->sequential->looks, (std::vector<int>{2, 3}));
  EXPECT_EQ(grid->sequential->max, 3);
  ASSERT_TRUE(grid->budget.steps.has_value());
  const int64_t budget = *grid->budget.steps;
  const nlohmann::json base = SpecOf(*grid, grid->baseline);
  EXPECT_EQ(base["positions"], "learned");
  EXPECT_EQ(SpecOf(*grid, "rope")["positions"], "rope");
  EXPECT_EQ(SpecOf(*grid, "rms")["norm"], "rms");
  int timed = 0;  // variants that change the optimizer, whose steps cost more
  for (const GridVariant& v : grid->variants) {
    timed += nlohmann::json::parse(v.spec_json)["optimizer"] != base["optimizer"];
  }
  EXPECT_EQ(timed, 1);

  ASSERT_TRUE(grid->reference.has_value()) << "the demo shows equal time";
  EXPECT_EQ(grid->reference->spec_hash, grid->FindVariant(grid->baseline)->spec_hash)
      << "the curve is the baseline's own spec (AdamW)";
  const std::vector<Budget>& budgets = grid->reference->budgets;
  ASSERT_GE(budgets.size(), 3u);
  for (const Budget& b : budgets) ASSERT_TRUE(b.steps.has_value());
  EXPECT_LT(*budgets.front().steps, budget);
  EXPECT_GE(*budgets.back().steps, budget * 3 / 2);
  EXPECT_TRUE(std::any_of(budgets.begin(), budgets.end(),
                          [&](const Budget& b) { return b.steps == budget; }))
      << "the baseline's own cell is a point of the curve, run once";
}

// ---- Malformed grids: every message names file:line and the key --------

TEST(GridErrorTest, YamlSyntaxErrorNamesTheLine) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: [1, 2"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:14:"));
  EXPECT_THAT(m, HasSubstr("YAML syntax error"));
}

TEST(GridErrorTest, NotAMapping) {
  const std::string m = ErrorOf("- just\n- a list\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:1:"));
  EXPECT_THAT(m, HasSubstr("a grid file is a mapping"));
}

TEST(GridErrorTest, EmptyFile) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("examples/demo.yaml:1: a grid file is a mapping"));
}

TEST(GridErrorTest, UnknownTopLevelKeySuggestsTheNearest) {
  const std::string m = ErrorOf(Demo("seeds:", "seed:"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:13:"));
  EXPECT_THAT(m, HasSubstr("unknown key \"seed\""));
  EXPECT_THAT(m, HasSubstr("did you mean \"seeds\"?"));
}

TEST(GridTest, HolmIsOffUnlessTheGridAsks) {
  absl::StatusOr<Grid> plain = Parse(kDemo);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->holm);
  absl::StatusOr<Grid> holm = Parse(Demo("seeds: [1, 2]", "seeds: [1, 2]\nholm: true"));
  ASSERT_TRUE(holm.ok()) << holm.status();
  EXPECT_TRUE(holm->holm);
}

TEST(GridErrorTest, HolmMustBeTrueOrFalse) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: [1, 2]\nholm: yes please"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:14: \"holm\": expected true or false, got "
                           "\"yes please\""));
}

TEST(GridErrorTest, UnknownRunSpecKeySuggestsTheNearest) {
  const std::string m = ErrorOf(Demo("  optimizer: adamw", "  optimiser: adamw"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:10:"));
  EXPECT_THAT(m, HasSubstr("\"optimiser\""));
  EXPECT_THAT(m, HasSubstr("did you mean \"optimizer\"?"));
}

TEST(GridErrorTest, UnknownKeyFarFromAnyListsTheValidKeys) {
  const std::string m = ErrorOf(Demo("  rope: {positions: rope}", "  rope: {zzzzzzzz: rope}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:17:"));
  EXPECT_THAT(m, HasSubstr("\"zzzzzzzz\""));
  EXPECT_THAT(m, HasSubstr("expected one of:"));
  EXPECT_THAT(m, HasSubstr("positions"));
}

TEST(GridErrorTest, UnknownNormNamesTheChoices) {
  const std::string m = ErrorOf(Demo("    norm: rms", "    norm: rsm"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:19: unknown norm \"rsm\" (expected layer or rms)"));
}

TEST(GridErrorTest, UnknownPresetNamesTheChoices) {
  const std::string m = ErrorOf(Demo("  arch: gpt2", "  arch: gpt3"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:4:"));
  EXPECT_THAT(m, HasSubstr("gpt3"));
  EXPECT_THAT(m, HasSubstr("gpt2 or modern"));
}

TEST(GridErrorTest, WrongTypeNamesKeyAndExpectedType) {
  const std::string m = ErrorOf(Demo("  layers: 2", "  layers: two"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:5: \"layers\": expected an integer, got \"two\""));
}

TEST(GridErrorTest, FractionalIntegerIsAWrongType) {
  const std::string m = ErrorOf(Demo("  batch: 8", "  batch: 8.5"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:9: \"batch\": expected an integer"));
}

TEST(GridErrorTest, QuotedNumberIsAWrongType) {
  const std::string m = ErrorOf(Demo("  lr: 0.003", "  lr: \"0.003\""));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:11: \"lr\": expected a number"));
}

TEST(GridErrorTest, ListWhereAScalarBelongsIsAWrongType) {
  const std::string m = ErrorOf(Demo("  embed: 64", "  embed: [64, 96]"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:7: \"embed\": expected an integer, got a list"));
}

TEST(GridErrorTest, VariantThatIsNotAMapping) {
  const std::string m = ErrorOf(Demo("  rope: {positions: rope}", "  rope: positions=rope"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:17: variant \"rope\": expected a mapping"));
}

TEST(GridErrorTest, EngineRejectionPointsAtTheOffendingKey) {
  // embed 64 / heads 3 is not whole: the engine says so, the grid says where.
  const std::string m = ErrorOf(Demo("  rope: {positions: rope}", "  rope: {heads: 3}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:17: variant \"rope\":"));
  EXPECT_THAT(m, HasSubstr("heads"));
}

TEST(GridErrorTest, EngineRejectionInTheBasePointsAtTheBaseKey) {
  const std::string m = ErrorOf(Demo("  batch: 8", "  batch: 0"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:9:"));
  EXPECT_THAT(m, HasSubstr("\"batch\""));
}

TEST(GridErrorTest, SeedInARunSpecPointsToSeeds) {
  const std::string m = ErrorOf(Demo("  rope: {positions: rope}", "  rope: {seed: 3}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:17: \"seed\" cannot be set in a run spec"));
  EXPECT_THAT(m, HasSubstr("seeds: [1, 2]"));
}

TEST(GridErrorTest, StepsInARunSpecPointsToBudget) {
  const std::string m = ErrorOf(Demo("  batch: 8\n", "  batch: 8\n  steps: 100\n"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:10: \"steps\" cannot be set in a run spec"));
  EXPECT_THAT(m, HasSubstr("budget: {steps:"));
}

TEST(GridErrorTest, DataInARunSpecPointsToTopLevel) {
  const std::string m = ErrorOf(Demo("  batch: 8\n", "  batch: 8\n  data: x\n"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:10: \"data\" cannot be set in a run spec"));
}

TEST(GridErrorTest, DuplicateKeyNamesBothLines) {
  const std::string m = ErrorOf(Demo("  batch: 8\n", "  batch: 8\n  batch: 16\n"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:10: duplicate key \"batch\" in base (first at "
                           "line 9)"));
}

TEST(GridErrorTest, EmptyGridHasNeitherVariantsNorAxes) {
  const std::string m = ErrorOf(Demo(
      "variants:\n  baseline: {}\n  rope: {positions: rope}\n  rms:\n    norm: rms\n",
      "variants: {}\n"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:15: empty grid"));
  EXPECT_THAT(m, HasSubstr("variants"));
}

TEST(GridErrorTest, EmptyGridWithoutAnyVariantsKey) {
  const std::string m = ErrorOf(Demo(
      "variants:\n  baseline: {}\n  rope: {positions: rope}\n  rms:\n    norm: rms\n", ""));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:1: empty grid"));
}

TEST(GridErrorTest, DuplicateVariantName) {
  const std::string m = ErrorOf(std::string(kDemo) + "  rope: {norm: rms}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:20: duplicate variant name \"rope\""));
  EXPECT_THAT(m, HasSubstr("line 17"));
}

TEST(GridErrorTest, AxisCombinationCollidingWithANamedVariant) {
  const std::string m =
      ErrorOf(Demo("  rms:\n    norm: rms\n", "  lr=0.001: {lr: 0.002}\ngrid:\n  lr: [0.001]\n"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:20: duplicate variant name \"lr=0.001\""));
}

TEST(GridErrorTest, TwoVariantsWithTheSameSpec) {
  const std::string m = ErrorOf(std::string(kDemo) + "  rope2: {positions: rope}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:20: variant \"rope2\" has the same run spec as "
                           "variant \"rope\""));
}

TEST(GridErrorTest, ReservedVariantName) {
  const std::string m = ErrorOf(std::string(kDemo) + "  reference: {lr: 0.001}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:20: variant name \"reference\" is reserved"));
}

TEST(GridErrorTest, MissingBaseline) {
  const std::string m = ErrorOf(Demo("baseline: baseline\n", ""));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:1: missing \"baseline\""));
}

TEST(GridErrorTest, BaselineNotAmongVariantsSuggestsTheNearest) {
  const std::string m = ErrorOf(Demo("baseline: baseline", "baseline: basline"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:14: \"baseline\": \"basline\" is not a variant"));
  EXPECT_THAT(m, HasSubstr("did you mean \"baseline\"?"));
}

TEST(GridErrorTest, MissingRequiredKeys) {
  for (const char* line : {"name: demo\n", "data: ../data/demo\n", "budget: {steps: 300}\n",
                           "seeds: [1, 2]\n"}) {
    const std::string key = std::string(line).substr(0, std::string(line).find(':'));
    const std::string m = ErrorOf(Demo(line, ""));
    EXPECT_THAT(m, HasSubstr("examples/demo.yaml:1: missing \"" + key + "\"")) << key;
  }
}

TEST(GridErrorTest, BadExperimentName) {
  const std::string m = ErrorOf(Demo("name: demo", "name: my demo"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:1: \"name\":"));
  EXPECT_THAT(m, HasSubstr("letters, digits"));
}

TEST(GridErrorTest, SeedsNotAList) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: 2"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:13: \"seeds\": expected a non-empty list"));
}

TEST(GridErrorTest, SeedsEmpty) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: []"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:13: \"seeds\": expected a non-empty list of "
                           "seeds, got an empty list"));
}

TEST(GridErrorTest, NegativeSeed) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: [1, -2]"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:13: \"seeds\": bad seed \"-2\""));
}

TEST(GridErrorTest, NonIntegerSeedOnItsOwnLine) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds:\n  - 1\n  - x"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:15: \"seeds\": bad seed \"x\""));
}

TEST(GridErrorTest, DuplicateSeed) {
  const std::string m = ErrorOf(Demo("seeds: [1, 2]", "seeds: [1, 1]"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:13: \"seeds\": seed 1 is listed twice"));
}

TEST(GridErrorTest, BudgetWithBothStepsAndMinutes) {
  const std::string m = ErrorOf(Demo("budget: {steps: 300}", "budget: {steps: 300, minutes: 2}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:12: \"budget\": give exactly one of steps or "
                           "minutes"));
}

TEST(GridErrorTest, BudgetWithNeitherStepsNorMinutes) {
  const std::string m = ErrorOf(Demo("budget: {steps: 300}", "budget: {}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:12: \"budget\": give exactly one of steps or "
                           "minutes"));
}

TEST(GridErrorTest, BudgetWithUnknownKey) {
  const std::string m = ErrorOf(Demo("budget: {steps: 300}", "budget: {step: 300}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:12: unknown key \"step\" in budget (did you "
                           "mean \"steps\"?)"));
}

TEST(GridErrorTest, BudgetStepsNotPositive) {
  const std::string m = ErrorOf(Demo("budget: {steps: 300}", "budget: {steps: 0}"));
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:12: \"steps\": expected a positive integer"));
}

TEST(GridErrorTest, AxisNotAList) {
  const std::string m = ErrorOf(std::string(kDemo) + "grid:\n  lr: 0.001\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: grid axis \"lr\": expected a non-empty list"));
}

TEST(GridErrorTest, AxisValueOfTheWrongTypeNamesItsLine) {
  const std::string m = ErrorOf(std::string(kDemo) + "grid:\n  norm:\n    - rms\n    - rsm\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:23: unknown norm \"rsm\""));
}

TEST(GridErrorTest, AxisValueListedTwice) {
  const std::string m = ErrorOf(std::string(kDemo) + "grid:\n  lr: [0.001, 1e-3]\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: grid axis \"lr\": value 1e-3 is listed twice"));
}

TEST(GridErrorTest, UnknownAxisKey) {
  const std::string m = ErrorOf(std::string(kDemo) + "grid:\n  lrate: [0.001]\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: unknown run-spec key \"lrate\""));
}

TEST(GridErrorTest, ReferenceWithoutBudgets) {
  const std::string m = ErrorOf(std::string(kDemo) + "reference:\n  optimizer: adamw\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:20: \"reference\": missing \"budgets\""));
}

TEST(GridErrorTest, ReferenceBudgetsMustIncrease) {
  const std::string m =
      ErrorOf(std::string(kDemo) + "reference:\n  budgets: {steps: [300, 150]}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: \"steps\": budgets must increase"));
}

TEST(GridErrorTest, ReferenceUnknownKey) {
  const std::string m =
      ErrorOf(std::string(kDemo) + "reference:\n  budget: {steps: [150]}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: unknown key \"budget\" in reference (did you "
                           "mean \"budgets\"?)"));
}

TEST(GridErrorTest, ReferenceBudgetsWithBothKinds) {
  const std::string m = ErrorOf(std::string(kDemo) +
                                "reference:\n  budgets: {steps: [150], minutes: [1]}\n");
  EXPECT_THAT(m, HasSubstr("examples/demo.yaml:21: \"budgets\": give exactly one of steps or "
                           "minutes"));
}

TEST(GridTest, EveryOptionalRunSpecKeyIsAGridKeyToo) {
  // muon_lr appears in a spec's JSON only when set; a grid may still set it.
  absl::StatusOr<Grid> grid = Parse(Demo("rope: {positions: rope}", "rope: {muon_lr: 0.01}"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(SpecOf(*grid, "rope")["muon_lr"], 0.01);
}

}  // namespace
}  // namespace smallem
