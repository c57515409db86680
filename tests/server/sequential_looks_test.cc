// What status and report say of sequential seeds (server/queue/
// sequential_looks.h: SummarizeLooks, RenderLooks, LooksJson), checked
// line by line against hand-written text, and PlanLooks on hand-made
// inputs.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/queue/sequential_looks.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

constexpr const char* kGrid = testing::kSequentialGrid;

ExperimentRecord Experiment() {
  return ExperimentRecord{.id = 1, .name = "seq", .baseline = "base", .grid_file = "seq.yaml",
                          .grid_yaml = kGrid, .dataset_hash = "feedbeef",
                          .seed_schedule = R"({"start":[1,2,3],"max":6,"looks":[3,6]})"};
}

std::vector<RunRecord> Runs(int base, int good, int open) {
  std::vector<RunRecord> runs;
  for (auto [variant, n] : {std::pair<std::string, int>{"base", base}, {"good", good},
                            {"open", open}}) {
    for (int seed = 1; seed <= n; ++seed) {
      RunRecord r;
      r.variant = variant;
      r.variant_kind = "variant";
      r.seed = seed;
      r.budget = "steps:20";
      r.status = RunStatus::kSucceeded;
      runs.push_back(r);
    }
  }
  return runs;
}

LookDecisionRecord Decision(std::string variant, int look, int seeds, std::string outcome,
                            double delta, double tau, double alpha) {
  return LookDecisionRecord{.experiment_id = 1, .variant = std::move(variant), .look = look,
                            .seeds = seeds, .outcome = std::move(outcome), .delta = delta,
                            .ci_low = delta - tau, .ci_high = delta + tau, .tau = tau,
                            .alpha = alpha, .equivalence_alpha = alpha / 2};
}

TEST(SequentialLooksTest, ReportLinesSayWhyEachArmStopped) {
  LookDecisionRecord last = Decision("open", 2, 6, "undecided", 0.001, 0.005, 0.048);
  last.seeds_to_decide = 14;
  const std::vector<LookDecisionRecord> decisions = {
      Decision("good", 1, 3, "better", -0.5, 0.01, 0.0052),
      Decision("open", 1, 3, "continue", -0.0007, 0.0123, 0.0052), last};
  absl::StatusOr<std::optional<LooksSummary>> s =
      SummarizeLooks(Experiment(), Runs(6, 3, 6), decisions);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ(RenderLooks(**s, false),
            "sequential seeds: looks at 3, 6 seeds per arm (at most 6), each variant decided "
            "against the baseline at equal steps at O'Brien–Fleming levels\n"
            "  arm   looks  seeds  why\n"
            "  base  -          6  the baseline: it gets the next look's seeds while a "
            "comparison with it is open\n"
            "  good  1/2        3  stopped at look 1 of 2: better (3 seeds per arm; "
            "Δ = -0.5000 nats/byte, τ = 0.0100 at α = 0.0052)\n"
            "  open  2/2        6  stopped at the last look (6 seeds per arm): undecided; "
            "Δ = +0.0010 nats/byte, τ = 0.0050 at α = 0.048; about 14 seeds per arm would "
            "decide it\n");
  const nlohmann::json j = LooksJson(**s);
  EXPECT_EQ(j["decisions"].size(), 3u);
  EXPECT_EQ(j["decisions"][2]["outcome"], "undecided");
  EXPECT_EQ(j["decisions"][2]["seeds_to_decide"], 14);
  EXPECT_EQ(j["arms"][1]["stopped"], true);
  EXPECT_EQ(j["arms"][2]["seeds"], 6);
}

TEST(SequentialLooksTest, OpenAndWaitingArmsSayWhatTheyWaitFor) {
  const std::vector<LookDecisionRecord> decisions = {
      Decision("open", 1, 3, "continue", -0.0007, 0.0123, 0.0052)};
  absl::StatusOr<std::optional<LooksSummary>> s =
      SummarizeLooks(Experiment(), Runs(6, 2, 6), decisions);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<ArmLooks>& arms = (*s)->arms;
  ASSERT_EQ(arms.size(), 3u);
  EXPECT_EQ(arms[1].why, "open: look 1 of 2 at 3 seeds per arm when its runs finish");
  EXPECT_EQ(arms[2].why,
            "open: undecided at look 1; Δ = -0.0007 nats/byte, τ = 0.0123 at α = 0.0052; look 2 "
            "of 2 at 6 seeds per arm when its runs finish");
  EXPECT_EQ(RenderLooks(**s, true).substr(0, 1), "\n");
  EXPECT_NE(RenderLooks(**s, true).find("| good | 0/2 | 2 | open: look 1 of 2"),
            std::string::npos);
}

TEST(SequentialLooksTest, PlainSeedListHasNoLooks) {
  ExperimentRecord e = Experiment();
  e.seed_schedule = "";
  absl::StatusOr<std::optional<LooksSummary>> s = SummarizeLooks(e, Runs(3, 3, 3), {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->has_value());
  absl::StatusOr<LookPlan> plan = PlanLooks(LookInputs{.experiment = e}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->decisions.empty());
}

TEST(SequentialLooksTest, UnfinishedLookDecidesNothing) {
  LookInputs in{.experiment = Experiment(), .runs = Runs(3, 3, 3), .results = {}, .decisions = {}};
  for (RunRecord& r : in.runs) r.status = RunStatus::kQueued;
  in.runs[0].status = RunStatus::kLeased;  // nothing finished yet
  absl::StatusOr<LookPlan> plan = PlanLooks(in, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->decisions.empty());
  EXPECT_TRUE(plan->cells.empty());
}

// Three looks, [3, 6, 9]: at the second, `flat` (Δ = 0, s ≈ 0.0036 per
// seed) has a conditional power of ~2e-4 and stops undecided for futility,
// queuing nothing; `near` (Δ = +0.004, not yet past τ ≈ 0.0065) has ~0.67
// and goes on to look 3 with the baseline.
TEST(SequentialLooksTest, FutileArmStopsUndecidedAtALookBeforeTheLast) {
  std::string grid = kGrid;
  grid.replace(grid.find("max: 6, looks: [3, 6]"), 21, "max: 9, looks: [3, 6, 9]");
  grid.replace(grid.find("good:"), 5, "flat:");
  grid.replace(grid.find("open:"), 5, "near:");
  LookInputs in{.experiment = Experiment(), .runs = {}, .results = {}, .decisions = {}};
  in.experiment.grid_yaml = grid;
  in.experiment.seed_schedule = R"({"start":[1,2,3],"max":9,"looks":[3,6,9]})";
  const double noise[] = {0.0045, -0.0045, 0.0015, -0.0015, 0.003, -0.003};
  for (auto [variant, loss, sign] : {std::tuple<std::string, double, double>{"base", 2.0, 1},
                                     {"flat", 2.0, -1}, {"near", 2.004, -1}}) {
    for (int seed = 1; seed <= 6; ++seed) {
      RunRecord r;
      r.id = static_cast<int64_t>(in.runs.size()) + 1;
      r.variant = variant;
      r.variant_kind = "variant";
      r.seed = seed;
      r.budget = "steps:20";
      r.budget_steps = 20;
      r.status = RunStatus::kSucceeded;
      in.runs.push_back(r);
      in.results.push_back(ResultRecord{
          .run_id = r.id, .attempt = 1,
          .result_json = absl::StrCat("{\"val_nats_per_byte\": ", loss + sign * noise[seed - 1],
                                      ", \"train_seconds\": 1, \"device_class\": \"cpu\"}"),
          .created_unix_ms = 1});
    }
  }
  in.decisions = {Decision("flat", 1, 3, "continue", 0.003, 0.03, 0.0016),
                  Decision("near", 1, 3, "continue", 0.007, 0.03, 0.0016)};
  absl::StatusOr<LookPlan> plan = PlanLooks(in, 5);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->decisions.size(), 2u);
  const LookDecisionRecord& flat = plan->decisions[0];
  EXPECT_EQ(flat.variant, "flat");
  EXPECT_EQ(flat.look, 2);
  EXPECT_EQ(flat.outcome, "undecided");
  EXPECT_EQ(flat.reason.rfind("futility: a ", 0), 0u) << flat.reason;
  EXPECT_NE(flat.reason.find(" % chance of a verdict at the last look (9 seeds per arm) if Δ "
                             "stays as measured, below 10 %; undecided: "),
            std::string::npos)
      << flat.reason;
  const LookDecisionRecord& near = plan->decisions[1];
  EXPECT_EQ(near.outcome, "continue") << near.reason;
  // Seeds 7–9 of near and of the baseline only.
  ASSERT_EQ(plan->cells.size(), 6u);
  for (const CellRecord& c : plan->cells) {
    EXPECT_NE(c.variant, "flat");
    EXPECT_GE(c.seed, 7);
  }

  // What status and report say of it.
  in.decisions.push_back(flat);
  in.decisions.push_back(near);
  absl::StatusOr<std::optional<LooksSummary>> s =
      SummarizeLooks(in.experiment, in.runs, in.decisions);
  ASSERT_TRUE(s.ok()) << s.status();
  const ArmLooks& arm = (*s)->arms[1];
  EXPECT_TRUE(arm.stopped);
  EXPECT_EQ(arm.why.rfind("stopped at look 2 of 3 (6 seeds per arm): undecided; Δ = ", 0), 0u)
      << arm.why;
  EXPECT_NE(arm.why.find("; futility: a "), std::string::npos) << arm.why;
  EXPECT_FALSE((*s)->arms[2].stopped);
}

}  // namespace
}  // namespace smallem
