// Faults with real processes: smallem-worker daemons (and their training
// children) and smallem-coordinator are separate processes, killed with
// SIGKILL mid-run. The runs train the tiny real config (1 layer, embed 32,
// context 32, vocabulary 300) on a dataset prepared in the test; they run
// 10,000 steps (~4 s here) rather than 20 (~10 ms) so that a kill lands
// mid-run.
#include <signal.h>

#include <chrono>
#include <thread>

#include "corpus/dataset.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "server/service/coordinator.h"
#include "tests/e2e/e2e_support.h"
#include "tests/e2e/worker_grid_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

constexpr int kLongSteps = 10'000;

class FaultTest : public testing::WorkerGridTest {};

TEST_F(FaultTest, KilledWorkerRunIsRequeuedAndFinishesExactlyOnce) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  options.queue.lease_duration_ms = 1'500;
  options.queue.reap_interval_ms = 100;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SqliteStore& store = (*coordinator)->store();
  Submit((*coordinator)->address(),
         testing::TinyGridYaml("kill", data_dir_, 1, 1, kLongSteps));

  std::unique_ptr<ChildProcess> first = SpawnWorker((*coordinator)->address(), "first");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->progress.step > 0; }, 60, {first.get()}))
      << "the first worker never reported progress";
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kLeased);
  first->Kill();  // kill -9 of the daemon; its training child dies with it
  EXPECT_EQ(first->Wait().signal, SIGKILL);

  // The lease expires, the reaper requeues the run, a second worker runs it.
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->status == RunStatus::kQueued; }, 10))
      << "the killed worker's lease was not requeued";
  std::unique_ptr<ChildProcess> second = SpawnWorker((*coordinator)->address(), "second");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->status == RunStatus::kSucceeded; }, 120,
                      {second.get()}))
      << "the requeued run never finished";

  RunRecord run = *store.GetRun(1);
  EXPECT_EQ(run.attempt, 2);
  EXPECT_EQ(run.lease_losses, 1);
  EXPECT_EQ(run.engine_failures, 0);
  std::vector<AttemptRecord> attempts = *store.ListAttempts(1);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].worker_id, "first");
  EXPECT_EQ(attempts[0].outcome, "lease_lost");
  EXPECT_EQ(attempts[1].worker_id, "second");
  EXPECT_EQ(attempts[1].outcome, "succeeded");
  std::vector<ResultRecord> results = *store.ListResults(1);
  ASSERT_EQ(results.size(), 1u);  // recorded exactly once
  EXPECT_EQ(results[0].attempt, 2);
  nlohmann::json result = nlohmann::json::parse(results[0].result_json);
  EXPECT_EQ(result["steps"], kLongSteps);
  second->Kill();
}

TEST_F(FaultTest, SigtermedWorkerReleasesItsRunAtOnceAndItFinishesExactlyOnce) {
  // What Slurm does at a time limit or on scancel. The lease lasts ten
  // minutes: only the worker's Release can requeue the run while the test
  // looks.
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  options.queue.lease_duration_ms = 600'000;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SqliteStore& store = (*coordinator)->store();
  Submit((*coordinator)->address(),
         testing::TinyGridYaml("preempt", data_dir_, 1, 1, kLongSteps));

  std::unique_ptr<ChildProcess> first = SpawnWorker((*coordinator)->address(), "first");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->progress.step > 0; }, 60, {first.get()}))
      << "the first worker never reported progress";
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kLeased);
  ASSERT_EQ(kill(first->pid(), SIGTERM), 0);
  ChildExit exit = first->Wait();
  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ(exit.exit_code, 0);

  // Queued the moment the worker is gone, charged to nothing.
  RunRecord released = *store.GetRun(1);
  EXPECT_EQ(released.status, RunStatus::kQueued);
  EXPECT_EQ(released.lease_losses, 0);
  EXPECT_EQ(released.engine_failures, 0);

  std::unique_ptr<ChildProcess> second = SpawnWorker((*coordinator)->address(), "second");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->status == RunStatus::kSucceeded; }, 120,
                      {second.get()}))
      << "the released run never finished";
  std::vector<AttemptRecord> attempts = *store.ListAttempts(1);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].worker_id, "first");
  EXPECT_EQ(attempts[0].outcome, kReleasedOutcome);
  EXPECT_EQ(attempts[1].worker_id, "second");
  EXPECT_EQ(attempts[1].outcome, "succeeded");
  std::vector<ResultRecord> results = *store.ListResults(1);
  ASSERT_EQ(results.size(), 1u);  // recorded exactly once
  EXPECT_EQ(results[0].attempt, 2);
  EXPECT_EQ(store.GetRun(1)->lease_losses, 0);
  second->Kill();
}

TEST_F(FaultTest, KilledCoordinatorComesBackWithEveryRunAndResult) {
  const std::string db = dir_.Join("smallem.db");
  // The first start binds a free port; the restart takes the same one back,
  // where the worker looks for its coordinator.
  std::string address = "127.0.0.1:0";
  auto start_coordinator = [&] {
    absl::StatusOr<testing::CoordinatorProcess> c =
        testing::StartCoordinatorProcess({"--db", db, "--lease-ms", "3000"}, address);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return std::unique_ptr<ChildProcess>();
    address = c->address;
    return std::move(c->process);
  };
  std::unique_ptr<ChildProcess> coordinator = start_coordinator();
  ASSERT_NE(coordinator, nullptr);
  // Two short runs and one long one.
  Submit(address, testing::TinyGridYaml("short", data_dir_, 2, 1, 20));
  Submit(address, testing::TinyGridYaml("long", data_dir_, 1, 1, kLongSteps));
  std::unique_ptr<ChildProcess> worker = SpawnWorker(address, "w");

  auto client = v1::ClientService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto experiment = [&](const std::string& name) {
    v1::GetExperimentRequest request;
    request.set_name(name);
    v1::GetExperimentResponse response;
    grpc::Status status;
    // The first call after a restart may go down the dead connection
    // (UNAVAILABLE); like every client, retry it.
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto context = testing::Context();
      context->set_wait_for_ready(true);  // the coordinator may be restarting
      status = client->GetExperiment(context.get(), request, &response);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    }
    if (!status.ok()) ADD_FAILURE() << name << ": " << status.error_message();
    return status.ok() ? response : v1::GetExperimentResponse();
  };
  ASSERT_TRUE(WaitFor([&] {
    return experiment("short").experiment().counts().succeeded() == 2 &&
           experiment("long").runs_size() == 1 &&
           experiment("long").runs(0).progress().step() > 0;
  }, 60, {worker.get(), coordinator.get()}));
  const std::string short_result = experiment("short").runs(0).result_json();

  coordinator->Kill();  // kill -9 under load: the long run is mid-training
  coordinator->Wait();  // down: the worker's calls fail until it is back
  coordinator = start_coordinator();
  ASSERT_NE(coordinator, nullptr);

  // Everything acknowledged is still there, and the long run finishes —
  // once — on the worker that kept training or re-leased it.
  v1::GetExperimentResponse short_after = experiment("short");
  ASSERT_EQ(short_after.runs_size(), 2);
  EXPECT_EQ(short_after.experiment().counts().succeeded(), 2);
  EXPECT_EQ(short_after.runs(0).result_json(), short_result);
  ASSERT_TRUE(WaitFor([&] { return experiment("long").experiment().counts().succeeded() == 1; },
                      120, {worker.get(), coordinator.get()}))
      << "the long run never finished after the coordinator restart";
  worker->Kill();
  coordinator->Kill();
  coordinator->Wait();

  // One result per run, checked in the database itself.
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(db);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->ListResults(1)->size(), 2u);
  EXPECT_EQ((*store)->ListResults(2)->size(), 1u);
}

}  // namespace
}  // namespace smallem
