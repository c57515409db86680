// The looks of sequential seeds as a store transaction (SqliteStore::
// DecideLooks, the planner Complete runs, server/queue/sequential_looks.h):
// decided once across a reopen, nothing half-written when the step fails,
// resubmission and cancel/retry around them. A real SQLite file; results
// written as a worker's Complete writes them.
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "server/queue/sequential_looks.h"
#include "server/queue/submission.h"
#include "server/service/coordinator.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

constexpr const char* kGrid = testing::kSequentialGrid;

// Validation loss of (variant, seed).
double Loss(const std::string& variant, int64_t seed) {
  const double noise[] = {0, 0.003, -0.003, 0.001, -0.001, 0.002, -0.002};
  const double e = noise[seed % 7];
  if (variant == "good") return 1.5 + e;
  if (variant == "open") return 2.0 - e;
  return 2.0 + e;
}

SubmissionRecord Submission(const Grid& grid) {
  SubmissionRecord s{.name = grid.name, .baseline = grid.baseline, .grid_file = "seq.yaml",
                     .grid_yaml = kGrid, .dataset_hash = "feedbeef",
                     .seed_schedule = grid.sequential->ToJson(), .retry_budget = 2, .cells = {}};
  for (const Cell& c : grid.Cells()) {
    s.cells.push_back(CellRecord{.variant = c.variant, .variant_kind = "variant",
                                 .spec_json = c.spec_json, .spec_hash = c.spec_hash,
                                 .seed = c.seed, .budget = BudgetKey(c.budget),
                                 .budget_steps = c.budget.steps,
                                 .budget_minutes = c.budget.minutes});
  }
  return s;
}

class SqliteStoreLooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Grid> grid = ParseGrid(kGrid, "seq.yaml");
    ASSERT_TRUE(grid.ok()) << grid.status();
    submission_ = Submission(*grid);
    Reopen();
    absl::StatusOr<SubmitOutcome> out = store_->Submit(submission_, 1);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->added, 9);
    experiment_ = out->experiment_id;
  }

  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("s.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // Leases and completes queued runs (all when `count` < 0) with Loss().
  void CompleteQueued(int count = -1) {
    for (int done = 0; count < 0 || done < count; ++done) {
      absl::StatusOr<std::optional<LeaseRecord>> lease =
          store_->LeaseNextRun("w", "cpu", "cpu", 10, 1'000'000);
      ASSERT_TRUE(lease.ok()) << lease.status();
      if (!lease->has_value()) return;
      const RunRecord& run = (*lease)->run;
      const std::string result = absl::StrCat(
          "{\"val_nats_per_byte\": ", Loss(run.variant, run.seed),
          ", \"train_seconds\": 1, \"params\": 1000, \"device_class\": \"cpu\"}");
      ASSERT_TRUE(store_->Complete(run.id, run.attempt, "w", result, {}, 20).ok());
    }
  }

  // Runs per variant, and how many are queued.
  std::map<std::string, int> Runs(int* queued = nullptr) {
    absl::StatusOr<std::vector<RunRecord>> runs = store_->ListRuns(experiment_);
    EXPECT_TRUE(runs.ok()) << runs.status();
    std::map<std::string, int> out;
    if (queued != nullptr) *queued = 0;
    for (const RunRecord& r : *runs) {
      ++out[r.variant];
      if (queued != nullptr && r.status == RunStatus::kQueued) ++*queued;
    }
    return out;
  }

  std::vector<std::string> Decisions() {
    absl::StatusOr<std::vector<LookDecisionRecord>> d = store_->ListLookDecisions(experiment_);
    EXPECT_TRUE(d.ok()) << d.status();
    std::vector<std::string> out;
    for (const LookDecisionRecord& r : *d) {
      out.push_back(absl::StrCat(r.variant, "@", r.look, ":", r.outcome, "/", r.seeds));
    }
    return out;
  }

  testing::TempDir dir_;
  SubmissionRecord submission_;
  std::unique_ptr<SqliteStore> store_;
  int64_t experiment_ = 0;
};

const std::map<std::string, int> kAfterLook1 = {{"base", 6}, {"good", 3}, {"open", 6}};

TEST_F(SqliteStoreLooksTest, CompleteDecidesTheLookOnceAcrossAReopen) {
  store_->SetLookPlanner(PlanLooks);
  CompleteQueued(7);
  EXPECT_TRUE(Decisions().empty()) << "no arm has its look's runs yet";
  CompleteQueued(1);  // good's third seed: good's look 1, at its own pace
  EXPECT_EQ(Decisions(), std::vector<std::string>{"good@1:better/3"});
  CompleteQueued(1);
  const std::vector<std::string> expected = {"good@1:better/3", "open@1:continue/3"};
  EXPECT_EQ(Decisions(), expected);
  int queued = 0;
  EXPECT_EQ(Runs(&queued), kAfterLook1);
  EXPECT_EQ(queued, 6);  // open's and base's seeds 4, 5, 6

  Reopen();
  store_->SetLookPlanner(PlanLooks);
  absl::StatusOr<LookPlan> again = store_->DecideLooks(experiment_, 30);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->decisions.empty());
  EXPECT_TRUE(again->cells.empty());
  EXPECT_EQ(Decisions(), expected);
  EXPECT_EQ(Runs(), kAfterLook1);

  // The last look stops open whatever it shows; nothing more is queued.
  CompleteQueued();
  const std::vector<std::string> d = Decisions();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].rfind("open@2:", 0), 0u) << d[2];
  EXPECT_EQ(d[2].find("continue"), std::string::npos) << d[2];
  EXPECT_EQ(Runs(), kAfterLook1);
}

TEST_F(SqliteStoreLooksTest, FailedDecisionLeavesNothingAndTheNextStepCompletesIt) {
  CompleteQueued();  // no planner: the results only
  // A plan whose last write fails (a cell of a variant the experiment does
  // not have): its decisions and the runs before it must go too.
  store_->SetLookPlanner([](const LookInputs& in, int64_t now) -> absl::StatusOr<LookPlan> {
    absl::StatusOr<LookPlan> plan = PlanLooks(in, now);
    if (plan.ok()) plan->cells.push_back(CellRecord{.variant = "ghost", .spec_hash = "none"});
    return plan;
  });
  absl::StatusOr<LookPlan> failed = store_->DecideLooks(experiment_, 30);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition) << failed.status();
  EXPECT_TRUE(Decisions().empty());
  EXPECT_EQ(Runs(), (std::map<std::string, int>{{"base", 3}, {"good", 3}, {"open", 3}}));

  store_->SetLookPlanner(PlanLooks);
  absl::StatusOr<LookPlan> done = store_->DecideLooks(experiment_, 40);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->decisions.size(), 2u);
  EXPECT_EQ(Runs(), kAfterLook1);
}

// A decision step that fails inside Complete, half-way through its writes
// (decisions written, then a cell that cannot be) or before any: the result
// is kept, nothing of the decision is.
TEST_F(SqliteStoreLooksTest, FailedDecisionInCompleteKeepsTheResultAndNothingElse) {
  int calls = 0;
  store_->SetLookPlanner([&calls](const LookInputs& in, int64_t now) -> absl::StatusOr<LookPlan> {
    if (++calls % 2 == 0) return absl::InternalError("planner down");
    absl::StatusOr<LookPlan> plan = PlanLooks(in, now);
    if (plan.ok()) plan->cells.push_back(CellRecord{.variant = "ghost", .spec_hash = "none"});
    return plan;
  });
  CompleteQueued();
  EXPECT_EQ(calls, 9);
  absl::StatusOr<RunCountsRecord> counts = store_->CountRuns(experiment_);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->succeeded, 9);
  EXPECT_TRUE(Decisions().empty());
  store_->SetLookPlanner(PlanLooks);
  ASSERT_TRUE(store_->DecideLooks(experiment_, 40).ok());
  EXPECT_EQ(Runs(), kAfterLook1);
}

TEST_F(SqliteStoreLooksTest, ResubmissionQueuesNoSeedsAndKeepsTheLooks) {
  store_->SetLookPlanner(PlanLooks);
  CompleteQueued(9);
  ASSERT_EQ(Runs(), kAfterLook1);
  absl::StatusOr<SubmitOutcome> again = store_->Submit(submission_, 50);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->added, 0);
  EXPECT_EQ(again->reissued, 0);
  int queued = 0;
  EXPECT_EQ(Runs(&queued), kAfterLook1);
  EXPECT_EQ(queued, 6) << "the look's runs stay queued";
  EXPECT_EQ(Decisions().size(), 2u);
}

// Resubmitting after a cancel reissues the looks' seeds like the start
// seeds (a plain list's cancelled runs are reissued the same way), and adds
// none.
TEST_F(SqliteStoreLooksTest, ResubmissionAfterCancelReissuesTheLooksSeeds) {
  store_->SetLookPlanner(PlanLooks);
  CompleteQueued(9);
  ASSERT_EQ(*store_->Cancel(RunSelector{.experiment_id = experiment_, .run_ids = {}}, 30), 6);
  // The dataset the grid names, as an upload leaves it.
  const std::string meta = "{}";
  ASSERT_TRUE(store_->PutDatasetChunk("feedbeef", {.file_name = "meta.json",
                                                   .file_size = 2, .offset = 0, .length = 2},
                                      meta, 31).ok());
  const int64_t drops = store_->DatasetDrops();
  ASSERT_TRUE(store_->CompleteDataset("feedbeef", *store_->ListDatasetChunks("feedbeef"), drops)
                  .ok());
  const ManualClock clock(32);
  absl::StatusOr<SubmittedGrid> again = SubmitGrid(
      *store_, clock,
      GridSubmission{.yaml = kGrid, .file_name = "seq.yaml",
                     .dataset_hashes = {{ParseGrid(kGrid, "seq.yaml")->data_dir, "feedbeef"}},
                     .retry_budget = 0},
      2, 1000);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome.total, 15);
  EXPECT_EQ(again->outcome.added, 0);
  EXPECT_EQ(again->outcome.reissued, 6);
  int queued = 0;
  EXPECT_EQ(Runs(&queued), kAfterLook1);
  EXPECT_EQ(queued, 6);
}

TEST_F(SqliteStoreLooksTest, CancelledExperimentDecidesNothingUntilRetried) {
  CompleteQueued(8);
  ASSERT_TRUE(store_->Cancel(RunSelector{.experiment_id = experiment_, .run_ids = {}}, 30).ok());
  store_->SetLookPlanner(PlanLooks);
  absl::StatusOr<LookPlan> plan = store_->DecideLooks(experiment_, 31);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(Decisions().empty()) << "good's look is complete, but the experiment is cancelled";
  ASSERT_TRUE(store_->Retry(RunSelector{.experiment_id = experiment_, .run_ids = {}}, 32).ok());
  CompleteQueued(1);
  EXPECT_EQ(Decisions().size(), 2u);
  EXPECT_EQ(Runs(), kAfterLook1);
}

// A coordinator that died after the results and before their decision (here:
// results written with no planner) takes it when it starts, once.
TEST_F(SqliteStoreLooksTest, CoordinatorStartDecidesTheLooksACrashLeftOpen) {
  CompleteQueued();
  store_.reset();
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("s.db");
  options.reaper = false;
  for (int start = 0; start < 2; ++start) {
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<std::vector<LookDecisionRecord>> d =
        (*c)->store().ListLookDecisions(experiment_);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->size(), 2u) << "start " << start;
    absl::StatusOr<std::vector<RunRecord>> runs = (*c)->store().ListRuns(experiment_);
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 15u) << "start " << start;
  }
  Reopen();
}

TEST_F(SqliteStoreLooksTest, DeletingTheExperimentDeletesItsDecisions) {
  store_->SetLookPlanner(PlanLooks);
  CompleteQueued(9);
  ASSERT_EQ(Decisions().size(), 2u);
  ASSERT_TRUE(store_->DeleteExperiment(experiment_, /*force=*/false).ok());
  absl::StatusOr<std::vector<LookDecisionRecord>> d = store_->ListLookDecisions(experiment_);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
}

}  // namespace
}  // namespace smallem
