#include "server/analysis/equal_time.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/analysis/stats.h"
#include "tests/server/compared_runs.h"
#include "tests/server/reference_fixture.h"

namespace smallem {
namespace {

using ::testing::HasSubstr;
using testing::MakeRun;
using testing::Steps;


ComparedRun Finished(const std::string& variant, int64_t seed, int64_t steps, double loss,
                     double seconds, const std::string& device_class = "cpu") {
  return MakeRun(variant, seed, steps, RunState::kSucceeded, loss, seconds, device_class,
                 1'000'000);
}

// Baseline "base" = the reference spec (its 6000-step cells are the curve's
// 6000-step point); variants at 6000 steps; reference AdamW at 1500, 3000,
// 6000 and 12000 steps, two seeds each.
ComparisonPlan Plan() {
  ComparisonPlan plan;
  plan.experiment = "article16";
  plan.baseline = "base";
  plan.variants = {"base", "muon", "fast", "tiny", "late"};
  plan.seeds = {1, 2};
  plan.budget = Steps(6000);
  plan.reference = ReferencePlan{.budgets = {Steps(1500), Steps(3000), Steps(6000), Steps(12000)},
                                 .seeds = {1, 2},
                                 .shared_variant = "base"};
  return plan;
}

std::vector<ComparedRun> ReferenceRuns(const std::string& device_class = "cpu") {
  return {Finished("reference", 1, 1500, 1.050, 100, device_class),
          Finished("reference", 2, 1500, 1.052, 102, device_class),
          Finished("reference", 1, 3000, 1.000, 200, device_class),
          Finished("reference", 2, 3000, 1.002, 202, device_class),
          Finished("reference", 1, 12000, 0.900, 800, device_class),
          Finished("reference", 2, 12000, 0.902, 808, device_class)};
}

// The fixture. Curve points (mean seconds, mean loss):
// (101, 1.051), (201, 1.001), (402, 0.9505: the baseline's runs), (804, 0.901):
// 0.05 lower per doubling of time, a straight line in log time. σ pooled over
// the compared arms' seed pairs (4 × s² = 5e-7) and the other reference
// budgets' (s² = 2e-6, 2e-6, 2e-6; the 6000-step point is the baseline's own
// runs, counted once): σ² = 8e-6/7, df 7. The log-linear form fits within
// that noise (χ²/dof = 0.22): weighted least squares on
// x = −ln(t/t_ref), t_ref = (101·201·402·804)^¼ = 284.61 s, gives
// L(t_ref) = 0.975875, A = 0.0723620 per unit of ln t. Its left-out misses
// (−0.0001, −0.0006) are within the noise: no model error. Each row's
// τ_time = max(floor, t₀.₉₇₅(ν)·√(SE_V² + SE_R² + (R′·SE_t)² + ME²)); the
// test recomputes it from the row's terms.
//   base  t = 402: R = 0.950886, Δt = −0.00039                      undecided
//   muon  t = 565: R = 0.926256, Δt = +0.00424                        worse (1.57τ)
//         (at equal steps Δ = −0.0200: better (10.0τ) — wins per step, loses per minute)
//   fast  t = 302: R = 0.971583, Δt = −0.01608                        better (6.39τ)
//   tiny  t = 81 < 101: extrapolated ×0.802, R = 1.066810              worse
//   late  one seed of two: pending.
std::vector<ComparedRun> Fixture() {
  std::vector<ComparedRun> runs = ReferenceRuns();
  for (const ComparedRun& r :
       {Finished("base", 1, 6000, 0.950, 400), Finished("base", 2, 6000, 0.951, 404),
        Finished("muon", 1, 6000, 0.930, 560), Finished("muon", 2, 6000, 0.931, 570),
        Finished("fast", 1, 6000, 0.955, 300), Finished("fast", 2, 6000, 0.956, 304),
        Finished("tiny", 1, 6000, 1.134, 80), Finished("tiny", 2, 6000, 1.135, 82),
        Finished("late", 1, 6000, 0.940, 500)}) {
    runs.push_back(r);
  }
  return runs;
}

const TimeRow& Row(const TimeReport& report, const std::string& variant) {
  for (const TimeRow& row : report.rows) {
    if (row.variant == variant) return row;
  }
  ADD_FAILURE() << "no row " << variant;
  static const TimeRow none;
  return none;
}

TEST(TimeComparatorTest, HandComputedFixture) {
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(Plan(), Fixture());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->device_class, "cpu");
  ASSERT_TRUE(report->steps.noise.sigma.has_value());
  ASSERT_EQ(report->curve.size(), 4u);
  EXPECT_DOUBLE_EQ(report->curve[2].seconds, 402);
  EXPECT_DOUBLE_EQ(report->curve[2].loss, 0.9505);
  ASSERT_EQ(report->rows.size(), 5u);
  EXPECT_EQ(report->rows[0].variant, "base");

  const TimeRow& base = Row(*report, "base");
  EXPECT_EQ(base.verdict, Verdict::kUndecided);
  auto line = [](double t) { return 0.975875 - 0.0723620 * std::log(t / 284.6098217); };
  EXPECT_NEAR(*base.reference_loss, line(402), 1e-6);
  EXPECT_NEAR(*base.delta, 0.9505 - *base.reference_loss, 1e-12);
  EXPECT_FALSE(base.extrapolated);

  ASSERT_TRUE(report->choice.has_value());
  EXPECT_EQ(report->choice->curve.model(), CurveModel::kFit);
  EXPECT_EQ(report->choice->curve.form(), Form::kLogLinear);
  // The baseline's pair is also the curve's 6000-step point: counted once.
  EXPECT_TRUE(report->curve[2].in_arms_noise);
  EXPECT_EQ(report->choice->sigma_df, 7);
  EXPECT_NEAR(*report->choice->sigma, std::sqrt(8e-6 / 7), 1e-12);
  EXPECT_NEAR(*report->choice->misfit, 0.2349 * (8.5e-6 / 8) / (8e-6 / 7), 1e-3);

  const TimeRow& muon = Row(*report, "muon");
  EXPECT_DOUBLE_EQ(*muon.mean_seconds, 565);
  EXPECT_NEAR(*muon.reference_loss, line(565), 1e-6);
  EXPECT_NEAR(*muon.slope, -0.0723620 / 565, 1e-9);
  EXPECT_NEAR(*muon.delta, 0.9305 - *muon.reference_loss, 1e-12);
  // τ from its terms: SE_V = σ/√2 (two seeds, σ pooled over all runs, df 7),
  // SE_t = 565·cv/√2 with cv² the mean of (sd/mean)² over the seed pairs of
  // the arms (base, muon, fast, tiny) and the curve's other points (the
  // baseline's pair is the 6000-step point: once), df 7; SE_R from the
  // bootstrap; no model error.
  const double pairs[][2] = {{400, 404}, {560, 570}, {300, 304}, {80, 82},
                             {100, 102}, {200, 202}, {800, 808}};
  double cv2 = 0;
  for (const auto& p : pairs) {
    const double m = (p[0] + p[1]) / 2, var = (p[0] - p[1]) * (p[0] - p[1]) / 2;
    cv2 += var / (m * m) / 7;
  }
  EXPECT_EQ(report->time_spread.df, 7);
  EXPECT_NEAR(report->time_spread.cv, std::sqrt(cv2), 1e-12);
  EXPECT_NEAR(*muon.se_variant, std::sqrt(8e-6 / 7 / 2), 1e-12);
  EXPECT_NEAR(*muon.se_seconds, 565 * std::sqrt(cv2 / 2), 1e-9);
  EXPECT_EQ(*muon.se_model, 0);
  const double se = std::sqrt(*muon.se_variant * *muon.se_variant +
                              *muon.se_reference * *muon.se_reference +
                              std::pow(*muon.slope * *muon.se_seconds, 2));
  EXPECT_NEAR(*muon.se, se, 1e-12);
  // ν = min(df_σ, df_cv) = 7: t₀.₉₇₅(7) = 2.365.
  EXPECT_EQ(*muon.df, 7);
  EXPECT_NEAR(*muon.t_quantile, 2.364624, 1e-6);
  EXPECT_NEAR(*muon.tau, std::max(0.002, *muon.t_quantile * se), 1e-12);
  EXPECT_NEAR(*muon.ci_low, *muon.delta - *muon.t_quantile * se, 1e-12);
  EXPECT_EQ(muon.verdict, Verdict::kWorse);
  EXPECT_EQ(muon.VerdictText(), "worse (1.57τ)");
  EXPECT_EQ(report->steps.rows[1].VerdictText(), "better (10.0τ)");

  const TimeRow& fast = Row(*report, "fast");
  EXPECT_NEAR(*fast.reference_loss, line(302), 1e-6);
  EXPECT_EQ(fast.VerdictText(), "better (6.39τ)");

  const TimeRow& tiny = Row(*report, "tiny");
  EXPECT_TRUE(tiny.extrapolated);
  EXPECT_NEAR(tiny.span_ratio, 81.0 / 101.0, 1e-12);
  EXPECT_NEAR(*tiny.reference_loss, line(81), 1e-6);
  EXPECT_EQ(tiny.verdict, Verdict::kWorse);

  const TimeRow& late = Row(*report, "late");
  EXPECT_EQ(late.verdict, Verdict::kPending);
  EXPECT_EQ(late.VerdictText(), "pending: 1 of 2 seeds finished");
  EXPECT_EQ(late.seconds, (std::vector<double>{500}));
  EXPECT_FALSE(report->Complete());

  // Per-seed values for plots, in seed order.
  EXPECT_EQ(muon.seconds, (std::vector<double>{560, 570}));
  EXPECT_EQ(muon.losses, (std::vector<double>{0.930, 0.931}));
  EXPECT_EQ(muon.steps, (std::vector<int64_t>{6000, 6000}));

  // The extrapolation is said, with how far.
  bool said = false;
  for (const std::string& note : report->notes) {
    said = said || (note.find("tiny") != std::string::npos &&
                    note.find("0.80× the shortest reference run") != std::string::npos &&
                    note.find("extrapolated") != std::string::npos);
  }
  EXPECT_TRUE(said) << "no extrapolation note";
}

TEST(TimeComparatorTest, NoReferenceCurveIsRefused) {
  ComparisonPlan plan = Plan();
  plan.reference.reset();
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, Fixture());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(), HasSubstr("has no reference curve"));
  EXPECT_THAT(report.status().message(), HasSubstr("--at steps"));
}

TEST(TimeComparatorTest, ReferenceOnAnotherDeviceClassIsRefused) {
  ComparisonPlan plan = Plan();
  plan.reference->shared_variant = "";  // the curve's runs are all "reference" runs
  std::vector<ComparedRun> runs = ReferenceRuns("cuda:NVIDIA H200");
  runs.push_back(Finished("reference", 1, 6000, 0.95, 400, "cuda:NVIDIA H200"));
  runs.push_back(Finished("reference", 2, 6000, 0.95, 400, "cuda:NVIDIA H200"));
  runs.push_back(Finished("base", 1, 6000, 0.950, 400, "cpu:16"));
  runs.push_back(Finished("base", 2, 6000, 0.951, 404, "cpu:16"));
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(),
              HasSubstr("the reference curve ran on device class cuda:NVIDIA H200 but the "
                        "variants are compared on cpu:16"));
  EXPECT_THAT(report.status().message(), HasSubstr("only within one device class"));
}

TEST(TimeComparatorTest, ReferenceRunsOnOtherClassesAreLeftOutAndSaidSo) {
  std::vector<ComparedRun> runs = Fixture();
  runs.push_back(Finished("reference", 1, 1500, 0.5, 10, "cuda:NVIDIA H200"));
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(Plan(), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->curve[0].loss, 1.051);  // unchanged by the GPU run
  bool said = false;
  for (const std::string& note : report->notes) {
    said = said || note.find(
                       "1 finished reference run(s) on device class cuda:NVIDIA H200 "
                       "left out") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST(TimeComparatorTest, RowsWaitForTwoReferencePoints) {
  // Only the 1500-step budget has finished; the baseline's cells are not
  // shared with the curve here, so it has one point.
  std::vector<ComparedRun> runs;
  for (const ComparedRun& r : Fixture()) {
    if (r.variant == "reference" && r.budget.steps != 1500) continue;
    runs.push_back(r);
  }
  ComparisonPlan plan = Plan();
  plan.reference->shared_variant = "";
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->curve.size(), 1u);
  EXPECT_EQ(Row(*report, "muon").verdict, Verdict::kPending);
  EXPECT_EQ(Row(*report, "muon").pending_reason,
            "waiting for the reference curve (1 of 4 budgets finished on cpu)");
}

TEST(TimeComparatorTest, AnIncompleteCurveIsUsedAndSaidSo) {
  std::vector<ComparedRun> runs;
  for (const ComparedRun& r : Fixture()) {
    if (r.variant == "reference" && r.budget.steps == 12000 && r.seed == 2) continue;
    runs.push_back(r);
  }
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(Plan(), runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->curve.size(), 3u);
  // muon's 565 s are now beyond the last point (402 s): extrapolated.
  EXPECT_TRUE(Row(*report, "muon").extrapolated);
  EXPECT_NEAR(Row(*report, "muon").span_ratio, 565.0 / 402.0, 1e-12);
  ASSERT_FALSE(report->notes.empty());
  EXPECT_THAT(report->notes[0], HasSubstr("3 of 4 budgets finished on cpu"));
  EXPECT_THAT(report->notes[0], HasSubstr("12000 steps: 1 of 2 seeds finished"));
}

TEST(TimeComparatorTest, RowsWaitForTheBaselinesNoise) {
  std::vector<ComparedRun> runs;
  for (const ComparedRun& r : Fixture()) {
    if (r.variant == "base" && r.seed == 2) continue;
    runs.push_back(r);
  }
  ComparisonPlan plan = Plan();
  plan.reference->shared_variant = "";
  runs.push_back(Finished("reference", 1, 6000, 0.950, 400));
  runs.push_back(Finished("reference", 2, 6000, 0.951, 404));
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Row(*report, "muon").pending_reason, "waiting for the baseline");
}

// The reference seeds {1, 2, 3} and the compared seeds {1, 2}: the
// 6000-step point is the baseline's two runs plus a reference run of seed 3.
// The pooled σ and time spread count those three runs as one group (df 2),
// not the baseline's pair twice (once as an arm, once inside the point).
TEST(TimeComparatorTest, SharedBaselineSeedsArePooledOnce) {
  ComparisonPlan plan = Plan();
  plan.reference->seeds = {1, 2, 3};
  std::vector<ComparedRun> runs = Fixture();
  for (const ComparedRun& r :
       {Finished("reference", 3, 1500, 1.055, 101), Finished("reference", 3, 3000, 1.004, 199),
        Finished("reference", 3, 6000, 0.953, 406), Finished("reference", 3, 12000, 0.899, 806)}) {
    runs.push_back(r);
  }
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->choice.has_value());
  ASSERT_EQ(report->curve.size(), 4u);
  EXPECT_TRUE(report->curve[2].in_arms_noise);
  EXPECT_FALSE(report->curve[1].in_arms_noise);
  // Groups: base ∪ 6000-step point {0.950, 0.951, 0.953}; muon, fast, tiny
  // (pairs 0.001 apart); 1500, 3000, 12000 steps (three seeds each).
  const std::vector<std::vector<double>> losses = {
      {0.950, 0.951, 0.953}, {0.930, 0.931}, {0.955, 0.956}, {1.134, 1.135},
      {1.050, 1.052, 1.055}, {1.000, 1.002, 1.004}, {0.900, 0.902, 0.899}};
  const std::vector<std::vector<double>> seconds = {
      {400, 404, 406}, {560, 570}, {300, 304}, {80, 82},
      {100, 102, 101}, {200, 202, 199}, {800, 808, 806}};
  double loss_sum = 0, cv_sum = 0;
  int df = 0;
  for (size_t g = 0; g < losses.size(); ++g) {
    const double n1 = static_cast<double>(losses[g].size() - 1), m = Mean(seconds[g]);
    loss_sum += SampleVariance(losses[g]) * n1;
    cv_sum += SampleVariance(seconds[g]) / (m * m) * n1;
    df += static_cast<int>(n1);
  }
  EXPECT_EQ(df, 11);  // counting the pair twice would give 12
  EXPECT_EQ(report->choice->sigma_df, df);
  EXPECT_NEAR(*report->choice->sigma, std::sqrt(loss_sum / df), 1e-12);
  EXPECT_EQ(report->time_spread.df, df);
  EXPECT_NEAR(report->time_spread.cv, std::sqrt(cv_sum / df), 1e-12);
}

// The five budgets (tests/server/reference_fixture.h) as reference
// runs, the baseline their 1000-step runs: the chosen model's left-out
// misses (≈ +0.061, −0.025, +0.007 at 250, 500 and 1000 steps) all exceed
// the τ of a variant measured there (σ pooled over 12 df ≈ 0.003 — the
// 1000-step point is the baseline's runs, counted once — three seeds: τ ≈ 2.18·√(σ²/3 + SE_R²) ≈ 0.005), so the note names all three; and
// the model error ME(t) they measure widens τ_time between those budgets.
TEST(TimeComparatorTest, FixtureLeaveOneOutNoteFiresWhereAMissExceedsTau) {
  ComparisonPlan plan;
  plan.experiment = "fixture";
  plan.baseline = "base";
  plan.variants = {"base", "slow"};
  plan.seeds = {1, 2, 3};
  plan.budget = Steps(1000);
  plan.reference = ReferencePlan{.budgets = {}, .seeds = {1, 2, 3}, .shared_variant = "base"};
  std::vector<ComparedRun> runs;
  for (const CurvePoint& p : testing::FixtureCurvePoints()) {
    plan.reference->budgets.push_back(p.budget);
    for (int s = 0; s < 3; ++s) {
      const bool base = p.budget.steps == 1000;
      runs.push_back(Finished(base ? "base" : "reference", s + 1, *p.budget.steps,
                              p.seed_losses[s], p.seed_seconds[s]));
    }
  }
  // A variant at 1000 steps that takes 50 s: between the 1000- and 2000-step budgets.
  for (int s = 0; s < 3; ++s) runs.push_back(Finished("slow", s + 1, 1000, 1.4500 + 0.001 * s, 50 + s));
  absl::StatusOr<TimeReport> report = CompareAtEqualTime(plan, runs);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->choice.has_value());
  ASSERT_EQ(report->choice->left_out.size(), 3u);
  for (const LeftOut& m : report->choice->left_out) {
    ASSERT_TRUE(m.tau.has_value());
    EXPECT_TRUE(m.exceeds) << m.seconds << " s: miss " << m.miss << ", τ " << *m.tau;
  }
  std::string note;
  for (const std::string& n : report->notes) {
    if (n.find("Leave-one-out") != std::string::npos) note = n;
  }
  EXPECT_THAT(note, HasSubstr("250 steps misses by +0.06"));
  EXPECT_THAT(note, HasSubstr("1000 steps misses by +0.007"));
  // slow's 51 s lie between 1000 and 2000 steps: only the 1000-step miss
  // bounds that span, and its excess over the noise is the model error.
  const TimeRow& slow = Row(*report, "slow");
  const LeftOut& at1000 = report->choice->left_out[2];
  ASSERT_TRUE(slow.se_model.has_value());
  EXPECT_NEAR(*slow.se_model * *slow.se_model,
              std::max(0.0, at1000.miss * at1000.miss - *at1000.noise_variance), 1e-15);
  EXPECT_GT(*slow.se_model, 0.005);
  const double se2 = std::pow(*slow.se_variant, 2) + std::pow(*slow.se_reference, 2) +
                     std::pow(*slow.slope * *slow.se_seconds, 2) + std::pow(*slow.se_model, 2);
  EXPECT_NEAR(*slow.se, std::sqrt(se2), 1e-12);
  EXPECT_NEAR(*slow.tau, std::max(0.002, *slow.t_quantile * *slow.se), 1e-12);
}

}  // namespace
}  // namespace smallem
