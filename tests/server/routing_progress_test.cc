// A mixture of experts' routing balance (max/mean tokens per expert) on the
// coordinator: stored with a run's latest progress and with each curve point,
// read back by GetRun and the dashboard's JSON, reset by a new attempt,
// checked on the way in; and migration 0005 that added it keeps an older
// database's rows (at 0, "dense"). Real Coordinator, real SQLite file.
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/http/dashboard_api.h"
#include "server/queue/job_queue.h"
#include "server/queue/worker_registry.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_store.h"
#include "runspec/moe_config.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kLater = kNow + 60'000;

class RoutingProgressTest : public CoordinatorTest {
 protected:
  v1::HeartbeatRequest Beat(const v1::LeaseResponse& lease) {
    v1::HeartbeatRequest beat;
    beat.set_worker_id("w1");
    beat.set_run_id(lease.run_id());
    beat.set_attempt(lease.attempt());
    return beat;
  }
  grpc::Status Send(const v1::HeartbeatRequest& beat) {
    v1::HeartbeatResponse response;
    return worker_->Heartbeat(testing::Context().get(), beat, &response);
  }
};

TEST_F(RoutingProgressTest, LatestLoadReachesGetRunAndTheDashboard) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  v1::HeartbeatRequest beat = Beat(lease);
  for (int step : {10, 20}) {
    v1::Progress* p = beat.add_points();
    p->set_step(step);
    p->set_total_steps(20);
    p->set_loss(3.0);
    p->set_max_over_mean_load(step == 10 ? 1.5 : 1.25);
    for (double n : {96.0, 160.0, 128.0, 128.0}) p->add_tokens_per_expert(n);
  }
  ASSERT_TRUE(Send(beat).ok());

  v1::GetRunRequest request;
  request.set_run_id(lease.run_id());
  v1::GetRunResponse response;
  grpc::Status status = client_->GetRun(testing::Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_DOUBLE_EQ(response.run().progress().max_over_mean_load(), 1.25);
  // Only the load is stored, not the tokens per expert.
  EXPECT_EQ(response.run().progress().tokens_per_expert_size(), 0);

  WorkerRegistry registry(&coordinator_->store(), &clock_);
  DashboardApi api(&coordinator_->store(), &coordinator_->queue(), &registry, &clock_);
  absl::StatusOr<nlohmann::json> run = api.Run(lease.run_id(), -1);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_DOUBLE_EQ((*run)["run"]["progress"]["max_over_mean_load"].get<double>(), 1.25);
  ASSERT_EQ((*run)["points"].size(), 2u);
  EXPECT_DOUBLE_EQ((*run)["points"][0]["max_over_mean_load"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ((*run)["points"][1]["max_over_mean_load"].get<double>(), 1.25);
}

TEST_F(RoutingProgressTest, ImpossibleRoutingIsRefusedAndNotANumberIsDense) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();

  v1::HeartbeatRequest beat = Beat(lease);
  v1::Progress* p = beat.add_points();
  p->set_step(5);
  p->set_max_over_mean_load(-1);
  grpc::Status status = Send(beat);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("max_over_mean_load"), std::string::npos)
      << status.error_message();

  p->set_max_over_mean_load(1.0);
  for (int e = 0; e <= MoeConfig::kMaxExperts; ++e) p->add_tokens_per_expert(1);
  status = Send(beat);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("tokens_per_expert"), std::string::npos)
      << status.error_message();

  p->clear_tokens_per_expert();
  p->set_max_over_mean_load(NAN);
  ASSERT_TRUE(Send(beat).ok());
  absl::StatusOr<RunRecord> run = coordinator_->store().GetRun(lease.run_id());
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->progress.step, 5);
  EXPECT_EQ(run->progress.max_over_mean_load, 0.0);
}

RunStatus Decide(const RunRecord& run) { return JobQueue::NextStatus(run, JobQueueOptions{}); }

TEST(RoutingStoreTest, LoadSurvivesReopenAndANewAttemptStartsAtZero) {
  TempDir dir;
  const std::string path = dir.Join("smallem.db");
  int64_t run_id = 0;
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
    auto lease = (*store)->LeaseNextRun("w1", "cpu", "cpu-2t", kNow, kLater);
    ASSERT_TRUE(lease.ok() && lease->has_value());
    run_id = (*lease)->run.id;
    ASSERT_TRUE((*store)
                    ->Heartbeat(run_id, 1, "w1",
                                {ProgressRecord{.step = 10, .loss = 3, .max_over_mean_load = 1.75}},
                                kNow, kLater)
                    .ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_DOUBLE_EQ((*store)->GetRun(run_id)->progress.max_over_mean_load, 1.75);
  absl::StatusOr<std::vector<MetricPointRecord>> points = (*store)->ListMetricPoints(run_id, 1, -1);
  ASSERT_TRUE(points.ok() && points->size() == 1u);
  EXPECT_DOUBLE_EQ((*points)[0].max_over_mean_load, 1.75);

  // An engine error requeues the run; its next attempt has no progress yet.
  ASSERT_TRUE((*store)
                  ->Fail(run_id, 1, "w1", FailureClass::kEngineError, "boom", kNow, Decide)
                  .ok());
  auto again = (*store)->LeaseNextRun("w1", "cpu", "cpu-2t", kLater, kLater + 60'000);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->run.attempt, 2);
  EXPECT_EQ((*again)->run.progress.max_over_mean_load, 0.0);
}

TEST(RoutingStoreTest, MigrationAddsTheLoadToAVersionFourDatabaseAtZero) {
  TempDir dir;
  const std::string path = dir.Join("old.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok());
    const std::vector<Migration>& all = EmbeddedMigrations();
    ASSERT_GE(all.size(), 5u);
    ASSERT_TRUE(ApplyMigrations(**db, std::vector<Migration>(all.begin(), all.begin() + 4)).ok());
    ASSERT_TRUE((*db)->Exec(
        "INSERT INTO experiments VALUES (1, 'exp', 'v0', 'g.yaml', 'name: exp', 'feed', 1, 1);"
        "INSERT INTO variants VALUES (1, 1, 'v0', 'variant', '{}', 'abc');"
        "INSERT INTO runs (id, experiment_id, variant_id, spec_hash, seed, budget, "
        "budget_steps, status, attempt, retry_budget, progress_step, progress_total_steps, "
        "progress_loss, created_unix_ms, updated_unix_ms) "
        "VALUES (7, 1, 1, 'abc', 3, 'steps:20', 20, 'leased', 1, 2, 10, 20, 3.5, 1, 1);"
        "INSERT INTO metric_points VALUES (7, 1, 10, 3.5, 1000, 2.0, 5);")
                    .ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<RunRecord> run = (*store)->GetRun(7);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->progress.step, 10);
  EXPECT_DOUBLE_EQ(run->progress.loss, 3.5);
  EXPECT_EQ(run->progress.max_over_mean_load, 0.0);
  absl::StatusOr<std::vector<MetricPointRecord>> points = (*store)->ListMetricPoints(7, 1, -1);
  ASSERT_TRUE(points.ok() && points->size() == 1u);
  EXPECT_DOUBLE_EQ((*points)[0].tokens_per_s, 1000);
  EXPECT_EQ((*points)[0].max_over_mean_load, 0.0);
}

}  // namespace
}  // namespace smallem
