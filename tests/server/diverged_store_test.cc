// The diverged status in the store: terminal, kept across reopen, never
// requeued by retry or resubmission; and the migration that added it keeps
// every row of an older database.
#include <memory>

#include "gtest/gtest.h"
#include "server/queue/job_queue.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kLater = kNow + 60'000;

std::unique_ptr<SqliteStore> OpenStore(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

RunStatus Decide(const RunRecord& run) { return JobQueue::NextStatus(run, JobQueueOptions{}); }

TEST(DivergedStoreTest, DivergedRunIsTerminalSurvivesReopenAndIsNeverRequeued) {
  TempDir dir;
  const std::string path = dir.Join("smallem.db");
  std::unique_ptr<SqliteStore> store = OpenStore(path);
  ASSERT_TRUE(store->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  absl::StatusOr<std::optional<LeaseRecord>> lease =
      store->LeaseNextRun("w1", "cpu", "cpu-2t", kNow, kLater);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  const RunRecord& run = (*lease)->run;
  absl::StatusOr<RunRecord> after =
      store->Fail(run.id, run.attempt, "w1", FailureClass::kDiverged, "diverged at step 40",
                  kNow, Decide, DivergenceRecord{.step = 40, .last_finite_loss = 5.25});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status, RunStatus::kDiverged);

  store.reset();  // closed, then opened again: one owner at a time
  store = OpenStore(path);
  absl::StatusOr<RunRecord> read = store->GetRun(run.id);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->status, RunStatus::kDiverged);
  EXPECT_EQ(read->diverged_step, 40);
  ASSERT_TRUE(read->last_finite_loss.has_value());
  EXPECT_DOUBLE_EQ(*read->last_finite_loss, 5.25);
  EXPECT_EQ(read->engine_failures, 0) << "divergence is not charged to the retry budget";
  EXPECT_EQ(store->CountRuns(read->experiment_id)->diverged, 1);
  EXPECT_EQ(store->Stats()->runs.diverged, 1) << "the coordinator's /metrics counts it";

  // Nothing queues it again: no lease, no retry, no resubmission.
  EXPECT_FALSE(store->LeaseNextRun("w1", "cpu", "cpu-2t", kLater, kLater + 1)->has_value());
  EXPECT_EQ(*store->Retry(RunSelector{.experiment_id = read->experiment_id}, kLater), 0);
  absl::StatusOr<SubmitOutcome> again = store->Submit(MakeSubmission("exp", 1, 1), kLater);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->unchanged, 1);
  EXPECT_EQ(store->GetRun(run.id)->status, RunStatus::kDiverged);
}

TEST(DivergedStoreTest, DivergenceWithoutAFiniteLossStoresNone) {
  TempDir dir;
  std::unique_ptr<SqliteStore> store = OpenStore(dir.Join("smallem.db"));
  ASSERT_TRUE(store->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  auto lease = store->LeaseNextRun("w1", "cpu", "cpu-2t", kNow, kLater);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  ASSERT_TRUE(store->Fail((*lease)->run.id, 1, "w1", FailureClass::kDiverged, "boom", kNow,
                          Decide, DivergenceRecord{.step = 10})
                  .ok());
  EXPECT_FALSE(store->GetRun((*lease)->run.id)->last_finite_loss.has_value());
}

TEST(DivergedStoreTest, MigrationKeepsEveryRowOfAVersionOneDatabase) {
  TempDir dir;
  const std::string path = dir.Join("old.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(ApplyMigrations(**db, {EmbeddedMigrations()[0]}).ok());
    ASSERT_TRUE((*db)->Exec(
        "INSERT INTO experiments VALUES (1, 'exp', 'v0', 'g.yaml', 'name: exp', 'feed', 1, 1);"
        "INSERT INTO variants VALUES (1, 1, 'v0', 'variant', '{}', 'abc');"
        "INSERT INTO runs (id, experiment_id, variant_id, spec_hash, seed, budget, "
        "budget_steps, status, attempt, retry_budget, created_unix_ms, updated_unix_ms) "
        "VALUES (7, 1, 1, 'abc', 3, 'steps:20', 20, 'succeeded', 1, 2, 1, 1);"
        "INSERT INTO attempts (run_id, attempt, worker_id, device, device_class, "
        "started_unix_ms, outcome) VALUES (7, 1, 'w1', 'cpu', 'cpu-2t', 1, 'succeeded');"
        "INSERT INTO results VALUES (7, 1, '{\"val_nats_per_byte\": 1.5}', 1);")
                    .ok());
  }
  std::unique_ptr<SqliteStore> store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<RunRecord> run = store->GetRun(7);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->status, RunStatus::kSucceeded);
  EXPECT_EQ(run->seed, 3);
  EXPECT_EQ(run->diverged_step, 0);
  absl::StatusOr<std::optional<ResultRecord>> result = store->GetResult(7);
  ASSERT_TRUE(result.ok() && result->has_value());
  EXPECT_EQ((*result)->result_json, "{\"val_nats_per_byte\": 1.5}");
  // The rebuilt table still anchors its references: a dangling one fails.
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
  ASSERT_TRUE(db.ok());
  EXPECT_FALSE((*db)->Exec("INSERT INTO results VALUES (999, 1, '{}', 1)").ok());
}

}  // namespace
}  // namespace smallem
