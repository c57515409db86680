// WorkerDaemon against a real Coordinator (127.0.0.1:0, real SQLite file).
// Most tests use a scripted child (a shell script speaking the child
// protocol) to make timing and exit codes deterministic; the first trains
// the tiny real config through the real `smallem-worker child`.
//
// The daemon's time is a ManualClock the tests move: a heartbeat, a backoff
// or an idle pause ends only when the test says so. Tests wait on what they
// can observe (the coordinator's records, the job directories, the
// daemon's log), never for a fixed time.
#include "worker/daemon.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid.h"
#include "server/service/coordinator.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child.h"

namespace smallem {
namespace {

using testing::TempDir;

// A child that prints `steps` progress lines `sleep_s` apart, then writes a
// result and exits with `exit_code`.
std::string WriteScriptedChild(const std::string& path, int steps, double sleep_s,
                               int exit_code, const std::string& stderr_line = "") {
  std::string script = "#!/bin/sh\n# args: child --spec S --out D ...\nout=\"$5\"\n";
  for (int i = 1; i <= steps; ++i) {
    absl::StrAppend(&script, "echo '{\"event\":\"progress\",\"step\":", i,
                    ",\"total_steps\":", steps, ",\"loss\":", 5.0 - 0.1 * i,
                    ",\"tokens_per_s\":100,\"elapsed_s\":", i * sleep_s, ",\"eta_s\":1}'\n",
                    "sleep ", sleep_s, "\n");
  }
  absl::StrAppend(&script,
                  "echo '{\"val_nats_per_byte\":1.5,\"train_seconds\":1,\"params\":10,"
                  "\"device_class\":\"cpu-test\",\"steps\":",
                  steps, "}' > \"$out/result.json\"\n");
  if (!stderr_line.empty()) absl::StrAppend(&script, "echo '", stderr_line, "' >&2\n");
  absl::StrAppend(&script, "exit ", exit_code, "\n");
  testing::WriteFile(path, script);
  chmod(path.c_str(), 0755);
  return path;
}

// The default logger's lines, also kept here for the test to read, while
// it lives (construct and destroy it while no other thread logs).
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~CapturedLog() {
    std::vector<spdlog::sink_ptr>& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  // How many of the kept lines contain `text`.
  int Count(absl::string_view text) const {
    int n = 0;
    for (const std::string& line : sink_->last_formatted()) n += absl::StrContains(line, text);
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

class DaemonTest : public ::testing::Test {
 protected:
  // The coordinator's heartbeat interval, which the daemon adopts.
  static constexpr int64_t kHeartbeatMs = 100;

  void SetUp() override {
    log_ = std::make_unique<CapturedLog>();
    StartCoordinator("127.0.0.1:0");
    data_dir_ = dir_.Join("data");
    hash_ = testing::WriteFakeDataset(data_dir_);
  }
  void TearDown() override {
    StopDaemon();
    coordinator_.reset();
    log_.reset();
  }

  void StartCoordinator(const std::string& listen) {
    CoordinatorOptions options;
    options.listen = listen;
    options.db_path = dir_.Join("smallem.db");
    options.queue.heartbeat_interval_ms = kHeartbeatMs;
    options.queue.lease_duration_ms = 5'000;
    options.queue.reap_interval_ms = 100;
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    client_ = v1::ClientService::NewStub(
        grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials()));
  }

  void Submit(int variants, int seeds, int retry_budget = 2) {
    ASSERT_TRUE(testing::UploadDirectory(*client_, data_dir_, hash_).ok());
    const std::string yaml = testing::MakeGridYaml("exp", data_dir_, variants, seeds);
    v1::SubmitRequest request;
    request.set_grid_yaml(yaml);
    request.set_grid_file_name("grid.yaml");
    request.set_retry_budget(retry_budget);
    (*request.mutable_dataset_hashes())[ParseGrid(yaml, "grid.yaml")->data_dir] = hash_;
    v1::SubmitResponse response;
    grpc::Status status = client_->Submit(testing::Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // `adjust` may change the options before the daemon starts.
  void StartDaemon(const std::string& child_program, const std::string& address = "",
                   const std::function<void(WorkerOptions&)>& adjust = {}) {
    WorkerOptions options;
    options.coordinator = address.empty() ? coordinator_->address() : address;
    options.devices = {DeviceInfo{.name = "cpu", .device_class = "cpu-test", .memory_bytes = 0}};
    options.cache_dir = dir_.Join("cache");
    options.child_program = child_program;
    options.worker_id = "test-worker";
    options.child_threads = 1;
    options.initial_backoff_ms = 50;
    options.max_backoff_ms = 200;
    options.rpc_deadline = absl::Seconds(2);
    options.clock = &clock_;
    if (adjust) adjust(options);
    daemon_ = std::make_unique<WorkerDaemon>(options);
    daemon_thread_ = std::thread([this] { EXPECT_TRUE(daemon_->Run().ok()); });
  }

  void StopDaemon() {
    if (daemon_ == nullptr) return;
    daemon_->Stop();
    daemon_thread_.join();
    daemon_.reset();
  }

  // Looks at `done` until it holds, for up to `seconds` of real time,
  // moving the daemon's clock by a heartbeat interval at each look: its
  // heartbeats, backoffs and idle pauses go on as fast as the test looks.
  // Returns whether `done` held.
  template <typename Done>
  bool AdvanceUntil(Done done, int seconds = 60) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      clock_.AdvanceMs(kHeartbeatMs);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  // Every run of experiment 1 finished (up to a minute); their counts.
  RunCountsRecord WaitForRunsToFinish() {
    RunCountsRecord counts;
    AdvanceUntil([&] {
      counts = *coordinator_->store().CountRuns(1);
      return counts.total > 0 && counts.queued == 0 && counts.leased == 0;
    });
    return counts;
  }

  // Until run `run_id` has recorded progress (which heartbeats carry).
  void WaitForProgress(int64_t run_id = 1) {
    ASSERT_TRUE(AdvanceUntil(
        [&] { return coordinator_->store().GetRun(run_id)->progress.step > 0; }, 20))
        << "run " << run_id << " never reported progress";
  }

  // The directories under CACHE/jobs/`under`, by name.
  std::vector<std::string> JobDirNames(const std::string& under = "") {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(dir_.Join("cache/jobs/" + under), ec)) {
      if (entry.is_directory()) names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
  std::unique_ptr<CapturedLog> log_;
  ManualClock clock_;
  std::string data_dir_;
  std::string hash_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<v1::ClientService::Stub> client_;
  std::unique_ptr<WorkerDaemon> daemon_;
  std::thread daemon_thread_;
};

TEST_F(DaemonTest, TrainsLeasedRunsWithTheRealChildAndRecordsResults) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  // A real dataset this time: the child really trains.
  data_dir_ = dir_.Join("real");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data_dir_).ok());
  hash_ = Dataset::Open(data_dir_)->content_hash();
  Submit(2, 1);
  StartDaemon(testing::WorkerBinary());
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.succeeded, 2);
  std::optional<ResultRecord> result = *coordinator_->store().GetResult(1);
  ASSERT_TRUE(result.has_value());
  EXPECT_NE(result->result_json.find("val_nats_per_byte"), std::string::npos);
  // The dataset was fetched once, into the cache, by content hash.
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/datasets/" + hash_ + "/train.bin")));
  std::vector<MetricPointRecord> points = *coordinator_->store().ListMetricPoints(1, 1, -1);
  ASSERT_FALSE(points.empty());
  EXPECT_EQ(points.back().step, 20);
}

TEST_F(DaemonTest, RelaysProgressThenCompletes) {
  Submit(1, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 5, 0.1, 0));
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.succeeded, 1);
  std::vector<MetricPointRecord> points = *coordinator_->store().ListMetricPoints(1, 1, -1);
  ASSERT_EQ(points.size(), 5u);
  EXPECT_EQ(points[4].step, 5);
  EXPECT_EQ(coordinator_->store().GetRun(1)->progress.step, 5);
}

TEST_F(DaemonTest, CancelKillsTheChildAndReportsNothing) {
  Submit(1, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 200, 0.1, 0));
  WaitForProgress();
  ASSERT_EQ(*coordinator_->queue().Cancel(RunSelector{.experiment_id = 1}), 1);
  // The worker stops the child at its next heartbeat and removes the job's
  // directory, reporting nothing; it leases nothing more.
  ASSERT_TRUE(AdvanceUntil([&] { return JobDirNames().empty(); }, 20));
  EXPECT_EQ(coordinator_->store().GetRun(1)->status, RunStatus::kCancelled);
  std::vector<AttemptRecord> attempts = *coordinator_->store().ListAttempts(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, "cancelled");
  EXPECT_FALSE(coordinator_->store().GetResult(1)->has_value());
}

TEST_F(DaemonTest, EngineErrorIsRetriedUntilTheBudgetIsSpent) {
  Submit(1, 1, /*retry_budget=*/1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 1, 0, 1, "engine exploded"));
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.failed, 1);
  RunRecord run = *coordinator_->store().GetRun(1);
  EXPECT_EQ(run.attempt, 2);  // the first try and one retry
  EXPECT_EQ(run.engine_failures, 2);
  EXPECT_EQ(run.last_failure, FailureClass::kEngineError);
  EXPECT_EQ(run.last_error, "engine exploded");
}

TEST_F(DaemonTest, InvalidConfigIsNotRetried) {
  Submit(1, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 1, 0, 2, "heads must divide embed"));
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.failed, 1);
  RunRecord run = *coordinator_->store().GetRun(1);
  EXPECT_EQ(run.attempt, 1);
  EXPECT_EQ(run.last_failure, FailureClass::kInvalidConfig);
  EXPECT_EQ(run.last_error, "heads must divide embed");
}

TEST_F(DaemonTest, DrainLetsTheRunningJobFinishAndLeasesNothingMore) {
  Submit(1, 2);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 5, 0.1, 0));
  WaitForProgress();
  daemon_->Drain();
  daemon_thread_.join();
  daemon_.reset();
  RunCountsRecord counts = *coordinator_->store().CountRuns(1);
  EXPECT_EQ(counts.succeeded, 1);
  EXPECT_EQ(counts.queued, 1);
}

TEST_F(DaemonTest, StopKillsTheChildAndReleasesItsRunWithoutChargingIt) {
  Submit(1, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 200, 0.1, 0),
              "", [](WorkerOptions& o) { o.slurm_job_id = "4242"; });
  WaitForProgress();
  StopDaemon();
  // Queued when Run returned: released, not left for the reaper (the lease
  // lasts 5 s on a clock that no longer moves).
  RunRecord run = *coordinator_->store().GetRun(1);
  EXPECT_EQ(run.status, RunStatus::kQueued);
  EXPECT_EQ(run.lease_losses, 0);
  EXPECT_EQ(run.engine_failures, 0);
  std::vector<AttemptRecord> attempts = *coordinator_->store().ListAttempts(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, kReleasedOutcome);
  EXPECT_EQ(attempts[0].message, "the worker was stopped: Slurm job 4242 was signalled");
}

TEST_F(DaemonTest, ChildEndedBySigtermHasItsRunReleasedChargingNothing) {
  // Slurm signals every process of a job: the child may end before the
  // daemon has taken its own SIGTERM.
  Submit(1, 1, /*retry_budget=*/0);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 1, 0, kExitTerminated));
  ASSERT_TRUE(AdvanceUntil([&] {
    std::vector<AttemptRecord> attempts = *coordinator_->store().ListAttempts(1);
    return !attempts.empty() && attempts[0].outcome == kReleasedOutcome;
  }, 20));
  StopDaemon();
  RunRecord run = *coordinator_->store().GetRun(1);
  EXPECT_NE(run.status, RunStatus::kFailed);  // a budget of 0 would have failed it
  EXPECT_EQ(run.engine_failures, 0);
  EXPECT_EQ(run.lease_losses, 0);
  EXPECT_FALSE(coordinator_->store().GetResult(1)->has_value());
}

TEST_F(DaemonTest, ReconnectsWhenTheCoordinatorComesBack) {
  Submit(1, 2);
  const std::string address = coordinator_->address();
  const std::string listen = absl::StrCat("127.0.0.1:", coordinator_->port());
  client_.reset();
  coordinator_.reset();  // the coordinator goes away before the worker starts
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 2, 0.05, 0), address);
  // It fails to register, backs off, fails again.
  constexpr char kRefused[] = "cannot register with";
  ASSERT_TRUE(AdvanceUntil([&] { return log_->Count(kRefused) >= 2; }, 20));
  StartCoordinator(listen);  // same port, same database
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.succeeded, 2);
}

// A child that writes `stderr_lines` to stderr and aborts, as the engine does
// on a CHECK (a sticky CUDA error, an allocation it cannot recover from).
std::string WriteAbortingChild(const std::string& path, const std::string& stderr_lines) {
  testing::WriteFile(path, absl::StrCat("#!/bin/sh\nprintf '%s\\n' '", stderr_lines,
                                        "' >&2\nkill -ABRT $$\n"));
  chmod(path.c_str(), 0755);
  return path;
}

TEST_F(DaemonTest, CompletedJobLeavesNoDirectoryButTheDatasetStays) {
  Submit(2, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 2, 0.05, 0));
  EXPECT_EQ(WaitForRunsToFinish().succeeded, 2);
  StopDaemon();  // every RunJob has returned
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/jobs")));
  EXPECT_TRUE(JobDirNames().empty());
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/datasets/" + hash_ + "/meta.json")));
}

TEST_F(DaemonTest, FailedJobDirectoriesAreKeptUpToTheCapNewestFirst) {
  Submit(1, 1, /*retry_budget=*/3);  // four attempts, all failing
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 1, 0, 1, "engine exploded"), "",
              [](WorkerOptions& options) { options.max_failed_job_dirs = 2; });
  EXPECT_EQ(WaitForRunsToFinish().failed, 1);
  StopDaemon();
  EXPECT_EQ(coordinator_->store().GetRun(1)->attempt, 4);
  // Only the failed/ folder is left in jobs/, holding the last two attempts.
  EXPECT_EQ(JobDirNames(), (std::vector<std::string>{"failed"}));
  EXPECT_EQ(JobDirNames("failed"),
            (std::vector<std::string>{"run-1-attempt-3", "run-1-attempt-4"}));
  // What the child had, for debugging.
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/jobs/failed/run-1-attempt-4/spec.json")));
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/jobs/failed/run-1-attempt-4/result.json")));
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("cache/datasets/" + hash_ + "/meta.json")));
}

TEST_F(DaemonTest, CancelledJobLeavesNoDirectory) {
  Submit(1, 1);
  StartDaemon(WriteScriptedChild(dir_.Join("child.sh"), 200, 0.1, 0));
  WaitForProgress();
  ASSERT_EQ(*coordinator_->queue().Cancel(RunSelector{.experiment_id = 1}), 1);
  AdvanceUntil([&] { return JobDirNames().empty(); }, 20);
  StopDaemon();
  EXPECT_TRUE(JobDirNames().empty());
}

TEST_F(DaemonTest, OutOfMemoryCrashIsNotRetriedAndTheDaemonServesTheNextRun) {
  Submit(1, 2);
  StartDaemon(WriteAbortingChild(
      dir_.Join("child.sh"),
      "engine/arena.cc:26: CHECK failed: data.ok() activation memory: cuda:0: out of device "
      "memory allocating 8589934592 bytes; use a smaller batch or model"));
  RunCountsRecord counts = WaitForRunsToFinish();
  EXPECT_EQ(counts.failed, 2);  // the second run was leased after the first crashed
  for (int64_t run_id : {1, 2}) {
    RunRecord run = *coordinator_->store().GetRun(run_id);
    EXPECT_EQ(run.attempt, 1);
    EXPECT_EQ(run.last_failure, FailureClass::kInvalidConfig);
    EXPECT_NE(run.last_error.find("killed by signal 6"), std::string::npos) << run.last_error;
    EXPECT_NE(run.last_error.find("out of device memory"), std::string::npos) << run.last_error;
  }
}

TEST_F(DaemonTest, StickyCudaErrorFailsTheJobWithItsMessageAndIsRetried) {
  Submit(1, 1, /*retry_budget=*/1);
  StartDaemon(WriteAbortingChild(
      dir_.Join("child.sh"),
      "kernels/cuda_backend.cc:190: CHECK failed: error == cudaSuccess Free (a queued op "
      "failed): cudaErrorIllegalAddress (an illegal memory access was encountered)"));
  EXPECT_EQ(WaitForRunsToFinish().failed, 1);
  RunRecord run = *coordinator_->store().GetRun(1);
  EXPECT_EQ(run.attempt, 2);
  EXPECT_EQ(run.last_failure, FailureClass::kEngineError);
  EXPECT_NE(run.last_error.find("cudaErrorIllegalAddress"), std::string::npos) << run.last_error;
}

TEST_F(DaemonTest, CudaJobChildSeesOnlyItsGpu) {
  // No GPU is needed: the scripted child reports what it was given.
  const char* inherited = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = inherited != nullptr ? inherited : "";
  unsetenv("CUDA_VISIBLE_DEVICES");
  const std::string seen = dir_.Join("seen.txt");
  const std::string child = dir_.Join("child.sh");
  testing::WriteFile(child, absl::StrCat(
      "#!/bin/sh\nout=\"$5\"\necho \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES $*\" >> ", seen,
      "\necho '{\"val_nats_per_byte\":1.5,\"train_seconds\":1,\"params\":10,"
      "\"device_class\":\"NVIDIA H200\",\"steps\":1}' > \"$out/result.json\"\n"));
  chmod(child.c_str(), 0755);
  Submit(1, 1);
  StartDaemon(child, "", [](WorkerOptions& options) {
    options.devices = {DeviceInfo{.name = "cuda:1", .device_class = "NVIDIA H200",
                                  .memory_bytes = int64_t{150} << 30}};
  });
  EXPECT_EQ(WaitForRunsToFinish().succeeded, 1);
  StopDaemon();
  if (inherited != nullptr) setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  std::ifstream in(seen);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line.rfind("CUDA_VISIBLE_DEVICES=1 child --spec ", 0), 0u) << line;
  EXPECT_NE(line.find("--device cuda:0"), std::string::npos) << line;
  EXPECT_EQ(coordinator_->store().GetRun(1)->status, RunStatus::kSucceeded);
  // The result names the worker's device, not the child's cuda:0.
  const nlohmann::json result =
      nlohmann::json::parse(coordinator_->store().GetResult(1).value()->result_json);
  EXPECT_EQ(result["device"], "cuda:1");
}

}  // namespace
}  // namespace smallem
