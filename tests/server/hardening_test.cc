// What a hostile or broken client can do to a coordinator, and what it gets:
// a clear refusal, never a shared port, an unbounded queue, a stored string
// that breaks later reads, or memory that grows with what it sends.
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "corpus/dataset_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runspec/grid_parser.h"
#include "server/queue/worker_registry.h"
#include "server/service/coordinator.h"
#include "tests/server/coordinator_fixture.h"

namespace smallem {
namespace {

using testing::Context;

TEST_F(CoordinatorTest, ASecondCoordinatorCannotShareTheListeningPort) {
  CoordinatorOptions second;
  second.listen = absl::StrCat("127.0.0.1:", coordinator_->port());
  second.db_path = dir_.Join("other.db");
  second.reaper = false;
  absl::StatusOr<std::unique_ptr<Coordinator>> other = Coordinator::Start(second);
  ASSERT_FALSE(other.ok()) << "two coordinators listen on port " << coordinator_->port();
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(other.status().message().find("another coordinator"), std::string::npos);
}

TEST(CoordinatorAddressTest, TheBoundAddressKeepsTheListenHost) {
  testing::TempDir dir;
  CoordinatorOptions options;
  options.listen = "0.0.0.0:0";
  options.db_path = dir.Join("smallem.db");
  options.reaper = false;
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string port = absl::StrCat(":", (*c)->port());
  EXPECT_EQ((*c)->bound_address(), "0.0.0.0" + port);  // what the log says
  EXPECT_EQ((*c)->address(), "127.0.0.1" + port);      // where local clients dial
}

TEST_F(CoordinatorTest, AGridPastTheRunCapIsRefusedBeforeAnythingIsQueued) {
  CoordinatorOptions options;
  options.queue.max_runs_per_submission = 10;
  Restart(options);
  ASSERT_TRUE(testing::UploadDirectory(*client_, data_dir_, hash_).ok());
  v1::SubmitResponse response;
  grpc::Status status = Submit(testing::MakeGridYaml("big", data_dir_, 4, 3), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("expands to 12 runs"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("at most 10"), std::string::npos);
  v1::ListExperimentsResponse listed;
  ASSERT_TRUE(client_->ListExperiments(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.experiments_size(), 0);
}

TEST_F(CoordinatorTest, TooManySeedsAreRefusedWithTheLine) {
  std::string yaml = testing::MakeGridYaml("seeds", data_dir_, 1, grid_internal::kMaxSeeds + 1);
  absl::StatusOr<Grid> grid = ParseGrid(yaml, "many.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_NE(grid.status().message().find("many.yaml:5"), std::string::npos) << grid.status();
  EXPECT_NE(grid.status().message().find(absl::StrCat("at most ", grid_internal::kMaxSeeds)), std::string::npos);
}

TEST_F(CoordinatorTest, ASubmissionLargerThanOneWriteBatchQueuesEveryCellOnce) {
  v1::SubmitResponse first;
  UploadAndSubmit(/*variants=*/400, /*seeds=*/3, &first);  // 1,200 cells: three batches
  EXPECT_EQ(first.runs_total(), 1200);
  EXPECT_EQ(first.runs_added(), 1200);
  v1::SubmitResponse again;
  ASSERT_TRUE(Submit(testing::MakeGridYaml("exp", data_dir_, 400, 3), &again).ok());
  EXPECT_EQ(again.runs_added(), 0);
  EXPECT_EQ(again.runs_unchanged(), 1200);
}

class FailMessageTest : public CoordinatorTest {
 protected:
  // Fails this experiment's one run with `message`; the run as GetRun sends it.
  v1::Run FailWith(const std::string& message) {
    v1::SubmitResponse submitted;
    UploadAndSubmit(1, 1, &submitted);
    v1::LeaseResponse lease = Lease();
    v1::FailRequest fail;
    fail.set_worker_id("w1");
    fail.set_run_id(lease.run_id());
    fail.set_attempt(lease.attempt());
    fail.set_failure_class(v1::FAILURE_CLASS_ENGINE_ERROR);
    fail.set_message(message);
    v1::FailResponse failed;
    EXPECT_TRUE(worker_->Fail(Context().get(), fail, &failed).ok());
    v1::GetRunRequest get;
    get.set_run_id(lease.run_id());
    v1::GetRunResponse run;
    grpc::Status status = client_->GetRun(Context().get(), get, &run);
    EXPECT_TRUE(status.ok()) << status.error_message();  // a dangling byte fails the parse
    return run.run();
  }
};

TEST_F(FailMessageTest, AMessageCutInsideACharacterStaysReadable) {
  // 4,095 bytes then a two-byte character, then a forged log line.
  const v1::Run run = FailWith(std::string(4095, 'x') + "é\n\x1b[2K[info] all runs succeeded");
  EXPECT_EQ(run.last_error(), std::string(4095, 'x'));
}

TEST_F(FailMessageTest, ControlSequencesAreNotStored) {
  const v1::Run run = FailWith("out of memory\n\x1b[2Kforged");
  EXPECT_EQ(run.last_error(), "out of memory\n\xEF\xBF\xBD[2Kforged");
}

TEST_F(CoordinatorTest, AHugeWorkerIdIsRefusedWithoutBeingEchoed) {
  v1::HeartbeatRequest beat;
  beat.set_worker_id(std::string(1 << 20, 'w'));
  beat.set_run_id(1);
  beat.set_attempt(1);
  v1::HeartbeatResponse response;
  grpc::Status status = worker_->Heartbeat(Context().get(), beat, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(status.error_message().size(), 200u);
}

TEST_F(CoordinatorTest, ALeaseWithoutRegistrationIsRefused) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseRequest request;
  request.set_worker_id("never-registered");
  request.set_device("cpu");
  request.set_device_class("cpu-test");
  v1::LeaseResponse response;
  grpc::Status status = worker_->Lease(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("not registered"), std::string::npos);
  EXPECT_FALSE(response.leased());
}

TEST_F(CoordinatorTest, ARegistrationSurvivesARestart) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(Context().get(), testing::CpuRegistration(), &registered).ok());
  Restart();
  v1::LeaseRequest request;
  request.set_worker_id("w1");
  request.set_device("cpu");
  request.set_device_class("cpu-test");
  v1::LeaseResponse response;
  grpc::Status status = worker_->Lease(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(response.leased());
}

TEST_F(CoordinatorTest, SlurmJobAndNodeAreListedAndSurviveARestart) {
  v1::RegisterRequest slurm = testing::CpuRegistration();
  slurm.set_slurm_job_id("81234");
  slurm.set_slurm_node("gpu-n07");
  v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(Context().get(), slurm, &registered).ok());
  Restart();
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(client_->ListWorkers(Context().get(), {}, &listed).ok());
  ASSERT_EQ(listed.workers_size(), 1);
  EXPECT_EQ(listed.workers(0).slurm_job_id(), "81234");
  EXPECT_EQ(listed.workers(0).slurm_node(), "gpu-n07");
  // A job id with a control sequence would reach every listing: refused.
  slurm.set_slurm_job_id("1\x1b[2J");
  grpc::Status status = worker_->Register(Context().get(), slurm, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("slurm_job_id"), std::string::npos);
}

TEST_F(CoordinatorTest, OversizedRegistrationFieldsAreRefused) {
  v1::RegisterResponse response;
  v1::RegisterRequest big_host = testing::CpuRegistration();
  big_host.set_hostname(std::string(10 << 20, 'h'));
  EXPECT_EQ(worker_->Register(Context().get(), big_host, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::RegisterRequest many = testing::CpuRegistration();
  for (int i = 0; i < kMaxDevicesPerWorker; ++i) *many.add_devices() = many.devices(0);
  EXPECT_EQ(worker_->Register(Context().get(), many, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(client_->ListWorkers(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.workers_size(), 0);
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST_F(CoordinatorTest, AResultWithoutItsFieldsOrTheirTypesIsRefused) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  for (const char* bad : {R"({"val_nats_per_byte":0.9,"device_class":5})",
                          R"({"train_seconds":3.0})", R"({"val_nats_per_byte":"1.2"})",
                          R"({"val_nats_per_byte":1.2,"steps":-4})", "[1.2]"}) {
    SCOPED_TRACE(bad);
    v1::CompleteRequest request;
    request.set_worker_id("w1");
    request.set_run_id(lease.run_id());
    request.set_attempt(lease.attempt());
    request.set_result_json(bad);
    v1::CompleteResponse response;
    grpc::Status status = worker_->Complete(testing::Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("result_json"), std::string::npos);
  }
  EXPECT_TRUE(Complete(lease).ok());  // the run is still the worker's to complete
}

TEST_F(CoordinatorTest, AReportNeverFailsOnAResultStoredBeforeResultsWereChecked) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(2, 1, &submitted);
  for (const char* stored : {R"({"val_nats_per_byte":1.25,"device_class":5,"params":"x"})",
                             R"({"val_nats_per_byte":1.5,"train_seconds":"slow"})"}) {
    v1::LeaseResponse lease = Lease();
    ASSERT_TRUE(coordinator_->queue()
                    .Complete(lease.run_id(), lease.attempt(), "w1", stored, {})
                    .ok());
  }
  v1::ReportRequest request;
  request.set_name("exp");
  request.set_format(v1::REPORT_FORMAT_JSON);
  v1::ReportResponse report;
  grpc::Status status = client_->Report(testing::Context().get(), request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.runs_done(), 2);
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST_F(CoordinatorTest, ANaNLossInAHeartbeatKeepsTheLease) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  v1::HeartbeatRequest beat;
  beat.set_worker_id("w1");
  beat.set_run_id(lease.run_id());
  beat.set_attempt(lease.attempt());
  v1::Progress* p = beat.add_points();
  p->set_step(7);
  p->set_total_steps(20);
  p->set_loss(std::nan(""));
  p->set_tokens_per_s(std::numeric_limits<double>::infinity());
  v1::HeartbeatResponse response;
  grpc::Status status = worker_->Heartbeat(testing::Context().get(), beat, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(response.lease_expires_unix_ms(), 0);
  v1::GetRunRequest get;
  get.set_run_id(lease.run_id());
  v1::GetRunResponse run;
  ASSERT_TRUE(client_->GetRun(testing::Context().get(), get, &run).ok());
  EXPECT_EQ(run.run().status(), v1::RUN_STATUS_LEASED);
  EXPECT_EQ(run.run().progress().step(), 7);
  EXPECT_TRUE(std::isinf(run.run().progress().loss()));
  EXPECT_EQ(run.run().progress().tokens_per_s(), 0);
  EXPECT_TRUE(Complete(lease).ok());
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST(GridHardeningTest, AHugeNameIsNeitherComparedForLongNorEchoedWhole) {
  // YAML keys stop at 1,024 characters; values do not.
  const std::string name(1 << 20, 'k');
  const std::string yaml = absl::StrCat(
      "name: x\ndata: /d\nbudget: {steps: 10}\nseeds: [1]\nbaseline: ", name,
      "\nvariants:\n  a: {}\n");
  absl::StatusOr<Grid> grid = ParseGrid(yaml, "huge.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_NE(grid.status().message().find("huge.yaml:5"), std::string::npos) << grid.status();
  EXPECT_NE(grid.status().message().find(std::string(80, 'k') + "…"), std::string::npos);
  EXPECT_LT(grid.status().message().size(), 400u);
}

TEST(GridHardeningTest, ALongUnknownKeyIsEchoedCut) {
  const std::string key(1000, 'k');
  const std::string yaml = absl::StrCat(
      "name: x\ndata: /d\nbudget: {steps: 10}\nseeds: [1]\nbaseline: a\n"
      "variants:\n  a:\n    ", key, ": 1\n");
  absl::StatusOr<Grid> grid = ParseGrid(yaml, "long.yaml");
  ASSERT_FALSE(grid.ok());
  EXPECT_NE(grid.status().message().find("long.yaml:8"), std::string::npos) << grid.status();
  EXPECT_EQ(grid.status().message().find(std::string(81, 'k')), std::string::npos);
}

TEST(GridHardeningTest, ACloseKeyIsStillSuggested) {
  EXPECT_EQ(grid_internal::Suggest("layres", {"layers", "heads"}), " (did you mean \"layers\"?)");
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST_F(CoordinatorTest, FollowersAreCappedAndASlotFreesWhenOneLeaves) {
  CoordinatorOptions options;
  options.max_following_streams = 2;
  Restart(options);
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  v1::StreamMetricsRequest follow;
  follow.set_run_id(lease.run_id());
  follow.set_follow(true);

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::StreamMetricsResponse>>> readers;
  auto open = [&]() -> grpc::ClientReader<v1::StreamMetricsResponse>* {
    contexts.push_back(testing::Context());
    readers.push_back(client_->StreamMetrics(contexts.back().get(), follow));
    return readers.back().get();
  };
  v1::StreamMetricsResponse first;
  ASSERT_TRUE(open()->Read(&first));  // both followers are being served
  ASSERT_TRUE(open()->Read(&first));
  grpc::ClientReader<v1::StreamMetricsResponse>* third = open();
  EXPECT_FALSE(third->Read(&first));
  grpc::Status refused = third->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();

  contexts[0]->TryCancel();
  readers[0]->Finish().IgnoreError();
  // The handler notices the cancelled client within its idle check (1 s).
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    grpc::ClientReader<v1::StreamMetricsResponse>* again = open();
    served = again->Read(&first);
    if (!served) {
      again->Finish().IgnoreError();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_TRUE(served);
  for (auto& c : contexts) c->TryCancel();
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST_F(CoordinatorTest, WorkersThatLeftCanBeLeftOutOfTheListing) {
  v1::RegisterResponse registered;
  for (const char* id : {"old", "busy", "fresh"}) {
    v1::RegisterRequest r = testing::CpuRegistration();
    r.set_worker_id(id);
    ASSERT_TRUE(worker_->Register(testing::Context().get(), r, &registered).ok());
    if (std::string(id) == "busy") {
      v1::SubmitResponse submitted;
      UploadAndSubmit(1, 1, &submitted);
      ASSERT_TRUE(Lease("busy").leased());
    }
    clock_.AdvanceMs(3'600'000);  // an hour between registrations
  }
  v1::ListWorkersRequest recent;
  recent.set_seen_within_ms(60'000);
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(client_->ListWorkers(testing::Context().get(), recent, &listed).ok());
  ASSERT_EQ(listed.workers_size(), 1);  // "fresh" was seen an hour ago too: none is recent
  EXPECT_EQ(listed.workers(0).worker_id(), "busy");  // holds a lease: always listed
  EXPECT_EQ(listed.omitted(), 2);

  v1::ListWorkersRequest all;
  all.set_limit(2);
  ASSERT_TRUE(client_->ListWorkers(testing::Context().get(), all, &listed).ok());
  ASSERT_EQ(listed.workers_size(), 2);
  EXPECT_EQ(listed.workers(0).worker_id(), "fresh");  // most recently seen first
  EXPECT_EQ(listed.omitted(), 1);

  all.set_limit(5000);
  EXPECT_EQ(client_->ListWorkers(testing::Context().get(), all, &listed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace smallem

namespace smallem {
namespace {

TEST_F(CoordinatorTest, ADatasetTooSmallForTheContextIsRefusedAtSubmit) {
  // A dataset whose meta.json counts 40 training and 30 validation tokens.
  const std::string small_dir = dir_.Join("small");
  std::filesystem::create_directories(small_dir);
  const std::string tokenizer = R"({"type":"byte_bpe","merges":[],"special":{}})";
  const std::string train(80, '\1'), val(60, '\1');
  testing::WriteFile(small_dir + "/tokenizer.json", tokenizer);
  testing::WriteFile(small_dir + "/train.bin", train);
  testing::WriteFile(small_dir + "/val.bin", val);
  const std::string hash =
      DatasetContentHash(Sha256Hex(tokenizer), Sha256Hex(train), Sha256Hex(val));
  const nlohmann::json meta = {{"vocab", 256}, {"train_tokens", 40}, {"val_tokens", 30},
                               {"sha256", {{"tokenizer.json", Sha256Hex(tokenizer)},
                                           {"train.bin", Sha256Hex(train)},
                                           {"val.bin", Sha256Hex(val)}}},
                               {"content_hash", hash}};
  testing::WriteFile(small_dir + "/meta.json", meta.dump());
  ASSERT_TRUE(testing::UploadDirectory(*client_, small_dir, hash).ok());

  v1::SubmitRequest request;
  request.set_grid_yaml(testing::MakeGridYaml("small", small_dir, 1, 1));  // context 32
  request.set_grid_file_name("small.yaml");
  (*request.mutable_dataset_hashes())[small_dir] = hash;
  v1::SubmitResponse response;
  grpc::Status status = client_->Submit(testing::Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("30 validation tokens; a context of 32 needs at least 33"),
            std::string::npos)
      << status.error_message();
}

}  // namespace
}  // namespace smallem
