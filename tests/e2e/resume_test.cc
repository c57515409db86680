// Resumable runs through the service, with real processes: a coordinator, a
// smallem-worker daemon killed with SIGKILL after its run uploaded a
// checkpoint, and a second daemon that fetches the checkpoint and resumes.
// The run finishes once, with resumes = 1 and the result of an
// uninterrupted run of the same cell (CPU, one thread each). A checkpoint
// damaged on the coordinator is not resumed from: the run trains from the
// start.
#include <signal.h>

#include <chrono>
#include <ostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "corpus/dataset.h"
#include "engine/train/resume.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/report/experiment_report.h"
#include "server/service/coordinator.h"
#include "server/store/sqlite.h"
#include "tests/e2e/e2e_support.h"
#include "tests/e2e/worker_grid_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

constexpr int kSteps = 1500;

// The tiny grid with a checkpoint every `minutes` of training (0.002: every
// 0.12 s).
std::string CheckpointedGrid(const std::string& name, const std::string& data,
                             double minutes = 0.002) {
  std::string yaml = testing::TinyGridYaml(name, data, 1, 1, kSteps);
  const std::string base_end = "eval_batches: 4}";
  yaml.replace(yaml.find(base_end), base_end.size(),
               absl::StrCat("eval_batches: 4, checkpoint_minutes: ", minutes, "}"));
  return yaml;
}

class ServiceResumeTest : public testing::WorkerGridTest {};

TEST_F(ServiceResumeTest, KilledWorkersRunResumesFromItsCheckpointToTheUninterruptedResult) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  options.queue.lease_duration_ms = 1'500;
  options.queue.reap_interval_ms = 100;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SqliteStore& store = (*coordinator)->store();
  const std::string address = (*coordinator)->address();
  Submit(address, CheckpointedGrid("resume", data_dir_));

  std::unique_ptr<ChildProcess> first = SpawnWorker(address, "first");
  ASSERT_TRUE(WaitFor([&] { return store.GetCheckpoint(1)->has_value(); }, 60, {first.get()}))
      << "the first worker never stored a checkpoint";
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kLeased);
  const int64_t checkpoint_step = (*store.GetCheckpoint(1))->step;
  first->Kill();  // kill -9 of the daemon; its training child dies with it
  EXPECT_EQ(first->Wait().signal, SIGKILL);

  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->status == RunStatus::kQueued; }, 10))
      << "the killed worker's lease was not requeued";
  // The uninterrupted run of the same cell, queued behind the resumed one.
  Submit(address, CheckpointedGrid("clean", data_dir_));
  std::unique_ptr<ChildProcess> second = SpawnWorker(address, "second");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(2)->status == RunStatus::kSucceeded; }, 180,
                      {second.get()}))
      << "the runs never finished";
  second->Kill();

  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kSucceeded);
  std::vector<ResultRecord> results = *store.ListResults(1);
  ASSERT_EQ(results.size(), 1u);  // recorded exactly once
  EXPECT_EQ(results[0].attempt, 2);
  const nlohmann::json resumed = nlohmann::json::parse(results[0].result_json);
  const nlohmann::json clean = nlohmann::json::parse((*store.ListResults(2))[0].result_json);
  EXPECT_EQ(resumed["resumes"], 1);
  EXPECT_EQ(clean["resumes"], 0);
  EXPECT_EQ(resumed["steps"], kSteps);
  EXPECT_GT(checkpoint_step, 0);
  EXPECT_EQ(DeterministicResult(resumed).dump(), DeterministicResult(clean).dump());
  // The report says a run was resumed, and how often.
  absl::StatusOr<RenderedReport> report = RenderExperimentReport(
      store, *store.FindExperiment("resume"), ReportOptions{.at = CompareAt::kSteps});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->text.find("1 run resumed from a checkpoint after losing a worker (1 resume "
                              "in all)"),
            std::string::npos)
      << report->text;
  // Nothing is left on the coordinator's disk once the results are in (the
  // checkpoint goes just after the result is recorded).
  EXPECT_TRUE(WaitFor([&] { return store.GetCheckpointUsage()->count == 0; }, 10))
      << store.GetCheckpointUsage()->count << " checkpoints left";
}

// A worker stopped with SIGTERM (Slurm's time limit, a service stop) keeps
// what its run trained: the child writes a checkpoint at the step it reached
// — none was due, the interval is an hour — the daemon uploads it and
// releases the run, and the next worker resumes from that step to the
// result of an uninterrupted run.
TEST_F(ServiceResumeTest, StoppedWorkerCheckpointsAtTheSignal) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SqliteStore& store = (*coordinator)->store();
  const std::string address = (*coordinator)->address();
  Submit(address, CheckpointedGrid("stop", data_dir_, /*minutes=*/60));

  std::unique_ptr<ChildProcess> first = SpawnWorker(address, "first");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->progress.step >= 100; }, 60, {first.get()}))
      << "the first worker's run never reached step 100";
  ASSERT_FALSE(store.GetCheckpoint(1)->has_value()) << "no checkpoint was due yet";
  first->Terminate();
  std::vector<std::string> lines;
  EXPECT_TRUE(WaitFor([&] { return !first->Poll(0, &lines); }, 30)) << "the worker never exited";
  EXPECT_EQ(first->Wait().exit_code, 0);

  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kQueued) << "the stopped run was not released";
  const std::optional<CheckpointRecord> checkpoint = *store.GetCheckpoint(1);
  ASSERT_TRUE(checkpoint.has_value()) << "no checkpoint was written at the signal";
  EXPECT_GE(checkpoint->step, 100);
  EXPECT_LT(checkpoint->step, kSteps);

  Submit(address, CheckpointedGrid("clean", data_dir_, /*minutes=*/60));
  std::unique_ptr<ChildProcess> second = SpawnWorker(address, "second");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(2)->status == RunStatus::kSucceeded; }, 180,
                      {second.get()}))
      << "the runs never finished";
  second->Kill();
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kSucceeded);
  const nlohmann::json resumed =
      nlohmann::json::parse((*store.ListResults(1)).at(0).result_json);
  const nlohmann::json clean = nlohmann::json::parse((*store.ListResults(2)).at(0).result_json);
  EXPECT_EQ(resumed["resumes"], 1);
  EXPECT_EQ(DeterministicResult(resumed).dump(), DeterministicResult(clean).dump());
  // Stopped, not lost (as after Ctrl-C of `smallemctl run`): the report
  // says so, and blames no worker.
  absl::StatusOr<RenderedReport> report = RenderExperimentReport(
      store, *store.FindExperiment("stop"), ReportOptions{.at = CompareAt::kSteps});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->text.find("1 run resumed from a checkpoint after being stopped and started "
                              "again (1 resume in all)"),
            std::string::npos)
      << report->text;
  EXPECT_EQ(report->text.find("losing a worker"), std::string::npos) << report->text;
}


// A checkpoint whose stored bytes were damaged on the coordinator — cut
// short, or overwritten in place — fails the worker's size and SHA-256
// checks: the next worker trains the run from the start, to the result of
// an uninterrupted run, instead of resuming from bad weights.
struct Damage {
  const char* name;
  const char* sql;  // run against the database file, as an operator's sqlite3 would
};

void PrintTo(const Damage& damage, std::ostream* os) { *os << damage.name; }

class DamagedCheckpointTest : public testing::WorkerGridTest,
                              public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedCheckpointTest, TheRunTrainsFromTheStartToTheUninterruptedResult) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SqliteStore& store = (*coordinator)->store();
  const std::string address = (*coordinator)->address();
  Submit(address, CheckpointedGrid("damaged", data_dir_, /*minutes=*/60));

  // A stopped worker leaves a checkpoint (StoppedWorkerCheckpointsAtTheSignal).
  std::unique_ptr<ChildProcess> first = SpawnWorker(address, "first");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(1)->progress.step >= 100; }, 60, {first.get()}))
      << "the first worker's run never reached step 100";
  first->Terminate();
  std::vector<std::string> lines;
  EXPECT_TRUE(WaitFor([&] { return !first->Poll(0, &lines); }, 30)) << "the worker never exited";
  EXPECT_EQ(first->Wait().exit_code, 0);
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kQueued) << "the stopped run was not released";
  ASSERT_TRUE(store.GetCheckpoint(1)->has_value()) << "no checkpoint was written at the signal";
  {
    // A second connection to the database file changes the stored bytes.
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(options.db_path);
    ASSERT_TRUE(db.ok()) << db.status();
    const absl::Status damaged = (*db)->Exec(GetParam().sql);
    ASSERT_TRUE(damaged.ok()) << damaged;
    ASSERT_EQ((*db)->Changes(), 1);
  }

  Submit(address, CheckpointedGrid("clean", data_dir_, /*minutes=*/60));
  std::unique_ptr<ChildProcess> second = SpawnWorker(address, "second");
  ASSERT_TRUE(WaitFor([&] { return store.GetRun(2)->status == RunStatus::kSucceeded; }, 180,
                      {second.get()}))
      << "the runs never finished";
  second->Kill();
  ASSERT_EQ(store.GetRun(1)->status, RunStatus::kSucceeded);
  const ResultRecord result = (*store.ListResults(1)).at(0);
  EXPECT_EQ(result.attempt, 2);
  const nlohmann::json restarted = nlohmann::json::parse(result.result_json);
  const nlohmann::json clean = nlohmann::json::parse((*store.ListResults(2)).at(0).result_json);
  EXPECT_EQ(restarted["resumes"], 0);
  EXPECT_EQ(restarted["steps"], kSteps);
  EXPECT_EQ(DeterministicResult(restarted).dump(), DeterministicResult(clean).dump());
}

INSTANTIATE_TEST_SUITE_P(
    Damages, DamagedCheckpointTest,
    ::testing::Values(
        Damage{"CutShort",
               "UPDATE checkpoint_chunks SET data = substr(data, 1, length(data) - 100) "
               "WHERE run_id = 1 AND file_offset = "
               "(SELECT MAX(file_offset) FROM checkpoint_chunks WHERE run_id = 1)"},
        Damage{"OverwrittenInPlace",
               "UPDATE checkpoint_chunks SET data = zeroblob(length(data)) "
               "WHERE run_id = 1 AND file_offset = 0"}),
    [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace smallem
