// ClientService.DeleteExperiment and the list's hiding of experiments whose
// every run was cancelled, through a real coordinator on 127.0.0.1:0 over
// its SQLite file.
#include <memory>

#include "base/sha256.h"
#include "gtest/gtest.h"
#include "server/http/dashboard_api.h"
#include "server/queue/worker_registry.h"
#include "server/service/checkpoint_upload.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::Context;

class DeleteExperimentTest : public CoordinatorTest {
 protected:
  grpc::Status Delete(const std::string& name, bool force, v1::DeleteExperimentResponse* out) {
    v1::DeleteExperimentRequest request;
    request.set_name(name);
    request.set_force(force);
    return client_->DeleteExperiment(Context().get(), request, out);
  }

  grpc::Status Heartbeat(const v1::LeaseResponse& lease, int64_t step) {
    v1::HeartbeatRequest beat;
    beat.set_worker_id("w1");
    beat.set_run_id(lease.run_id());
    beat.set_attempt(lease.attempt());
    v1::Progress* p = beat.add_points();
    p->set_step(step);
    p->set_total_steps(20);
    p->set_loss(4.5);
    v1::HeartbeatResponse response;
    return worker_->Heartbeat(Context().get(), beat, &response);
  }

  v1::ListExperimentsResponse List(bool include_cancelled) {
    v1::ListExperimentsRequest request;
    request.set_include_cancelled(include_cancelled);
    v1::ListExperimentsResponse response;
    grpc::Status status = client_->ListExperiments(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
};

TEST_F(DeleteExperimentTest, RefusedWhileARunIsLeasedThenForceRemovesEverythingAtOnce) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(2, 1, &submitted);
  // One run finished (two curve points and a result), one still running
  // with a checkpoint.
  const v1::LeaseResponse done = Lease();
  ASSERT_TRUE(Heartbeat(done, 10).ok());
  ASSERT_TRUE(Heartbeat(done, 20).ok());
  ASSERT_TRUE(Complete(done).ok());
  const v1::LeaseResponse running = Lease();
  ASSERT_TRUE(running.leased());
  ASSERT_TRUE(Heartbeat(running, 10).ok());
  CheckpointUpload upload(&coordinator_->store(), &clock_);
  const std::string state = "checkpoint bytes";
  ASSERT_TRUE(upload
                  .Add(CheckpointPiece{.worker_id = "w1", .run_id = running.run_id(),
                                       .attempt = running.attempt(), .step = 10,
                                       .sha256 = Sha256Hex(state),
                                       .file_size = static_cast<int64_t>(state.size()),
                                       .offset = 0, .data = state})
                  .ok());
  ASSERT_TRUE(upload.Finish().ok());

  v1::DeleteExperimentResponse deleted;
  grpc::Status refused = Delete("exp", /*force=*/false, &deleted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("smallemctl cancel exp"), std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("--force"), std::string::npos) << refused.error_message();
  // Nothing went.
  EXPECT_EQ(coordinator_->store().ListRuns(submitted.experiment_id())->size(), 2u);
  EXPECT_TRUE(coordinator_->store().GetCheckpoint(running.run_id())->has_value());

  grpc::Status forced = Delete("exp", /*force=*/true, &deleted);
  ASSERT_TRUE(forced.ok()) << forced.error_message();
  EXPECT_EQ(deleted.name(), "exp");
  EXPECT_EQ(deleted.runs(), 2);
  EXPECT_EQ(deleted.results(), 1);
  EXPECT_EQ(deleted.metric_points(), 3);
  EXPECT_EQ(deleted.checkpoints(), 1);
  EXPECT_EQ(deleted.leased(), 1);

  // Gone from every read, and the running run's worker is told at its next
  // heartbeat that the run no longer exists (it stops it).
  v1::GetExperimentRequest get;
  get.set_name("exp");
  v1::GetExperimentResponse experiment;
  EXPECT_EQ(client_->GetExperiment(Context().get(), get, &experiment).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Heartbeat(running, 20).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(List(true).experiments_size(), 0);
  SqliteStore& store = coordinator_->store();
  for (int64_t run : {done.run_id(), running.run_id()}) {
    EXPECT_EQ(store.GetRun(run).status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(store.ListMetricPoints(run, 1, -1)->empty());
    EXPECT_FALSE(store.GetResult(run)->has_value());
    EXPECT_TRUE(store.ListAttempts(run)->empty());
    EXPECT_FALSE(store.GetCheckpoint(run)->has_value());
  }
  EXPECT_EQ(store.GetCheckpointUsage()->count, 0);

  // Deleted for good: the database reopened has none of it, and the same
  // grid submitted again starts afresh.
  Restart();
  EXPECT_EQ(coordinator_->store().FindExperiment("exp").status().code(),
            absl::StatusCode::kNotFound);
  v1::SubmitResponse again;
  UploadAndSubmit(2, 1, &again);
  EXPECT_EQ(again.runs_added(), 2);
}

TEST_F(DeleteExperimentTest, AnUnknownExperimentIsNotFound) {
  v1::DeleteExperimentResponse deleted;
  EXPECT_EQ(Delete("nowhere", false, &deleted).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DeleteExperimentTest, ExperimentsWhoseEveryRunWasCancelledAreHiddenUnlessAsked) {
  v1::SubmitResponse mistake;
  UploadAndSubmit(1, 2, &mistake);  // "exp"
  v1::CancelRequest cancel;
  cancel.set_experiment_id(mistake.experiment_id());
  v1::CancelResponse cancelled;
  ASSERT_TRUE(client_->Cancel(Context().get(), cancel, &cancelled).ok());
  // Another with a result and a cancelled run: something to read, so shown.
  v1::SubmitResponse kept;
  ASSERT_TRUE(Submit(testing::MakeGridYaml("kept", data_dir_, 1, 2), &kept).ok());
  ASSERT_TRUE(Complete(Lease()).ok());
  v1::CancelRequest cancel_rest;
  cancel_rest.set_experiment_id(kept.experiment_id());
  ASSERT_TRUE(client_->Cancel(Context().get(), cancel_rest, &cancelled).ok());
  ASSERT_EQ(cancelled.cancelled(), 1);

  const v1::ListExperimentsResponse shown = List(false);
  ASSERT_EQ(shown.experiments_size(), 1);
  EXPECT_EQ(shown.experiments(0).name(), "kept");
  EXPECT_EQ(shown.hidden(), 1);
  const v1::ListExperimentsResponse all = List(true);
  EXPECT_EQ(all.experiments_size(), 2);
  EXPECT_EQ(all.hidden(), 0);

  // The dashboard's list leaves it out alike, and shows it with ?all=1.
  WorkerRegistry workers(&coordinator_->store(), &clock_);
  DashboardApi api(&coordinator_->store(), &coordinator_->queue(), &workers, &clock_);
  absl::StatusOr<nlohmann::json> page = api.Experiments();
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ((*page)["experiments"].size(), 1u);
  EXPECT_EQ((*page)["experiments"][0]["name"], "kept");
  EXPECT_EQ((*page)["hidden"], 1);
  absl::StatusOr<nlohmann::json> every = api.Experiments(/*include_cancelled=*/true);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ((*every)["experiments"].size(), 2u);

  // Retried, it has runs to do again, and is listed.
  v1::RetryRequest retry;
  retry.set_experiment_id(mistake.experiment_id());
  v1::RetryResponse retried;
  ASSERT_TRUE(client_->Retry(Context().get(), retry, &retried).ok());
  EXPECT_EQ(List(false).experiments_size(), 2);
}

}  // namespace
}  // namespace smallem
