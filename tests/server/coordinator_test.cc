// The coordinator as its clients see it: a real Coordinator on 127.0.0.1
// port 0 with a real SQLite file, driven through the generated stubs.
#include "server/service/coordinator.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "base/sha256.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "server/service/dataset_upload.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::Context;
using testing::CpuRegistration;
using testing::MakeGridYaml;
using testing::TempDir;
using testing::UploadDirectory;
using testing::WriteFakeDataset;

TEST_F(CoordinatorTest, MalformedGridIsRejectedWithFileLineAndKey) {
  v1::SubmitResponse response;
  grpc::Status status = Submit(
      "name: bad\ndata: /d\nbudget: {steps: 10}\nseeds: [1]\nbaseline: a\n"
      "variants:\n  a: {norm: rsm}\n",
      &response, "bad.yaml");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("bad.yaml:7"), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find("rsm"), std::string::npos) << status.error_message();
}

TEST_F(CoordinatorTest, GridWhoseDatasetWasNotUploadedIsRefused) {
  v1::SubmitResponse response;
  grpc::Status status = Submit(MakeGridYaml("exp", data_dir_, 1, 1), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("upload"), std::string::npos) << status.error_message();
}

TEST_F(CoordinatorTest, UploadedDatasetIsPresentAndUploadingItAgainIsANoOp) {
  v1::HasDatasetRequest has;
  has.set_content_hash(hash_);
  v1::HasDatasetResponse present;
  ASSERT_TRUE(client_->HasDataset(Context().get(), has, &present).ok());
  EXPECT_FALSE(present.present());
  v1::UploadDatasetResponse upload;
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_, 1000, &upload).ok());
  EXPECT_EQ(upload.files(), 4);
  EXPECT_FALSE(upload.already_present());
  ASSERT_TRUE(client_->HasDataset(Context().get(), has, &present).ok());
  EXPECT_TRUE(present.present());
  EXPECT_EQ(present.total_bytes(), upload.total_bytes());
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_, 1000, &upload).ok());
  EXPECT_TRUE(upload.already_present());
}

TEST_F(CoordinatorTest, CorruptDatasetUploadIsRejected) {
  testing::WriteFile(data_dir_ + "/val.bin", "tampered");
  grpc::Status status = UploadDirectory(*client_, data_dir_, hash_);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_NE(status.error_message().find("val.bin"), std::string::npos) << status.error_message();
  v1::HasDatasetRequest has;
  has.set_content_hash(hash_);
  v1::HasDatasetResponse present;
  ASSERT_TRUE(client_->HasDataset(Context().get(), has, &present).ok());
  EXPECT_FALSE(present.present());
}

TEST_F(CoordinatorTest, DatasetFileDeclaredOverTheLimitIsRefused) {
  grpc::Status status = UploadTrainChunks(kDatasetFileBytes + 1, {{0, "abc"}});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at most"), std::string::npos) << status.error_message();
}

TEST_F(CoordinatorTest, ARefusedChunkDropsWhatTheUploadStored) {
  // 5 bytes at 7 overrun the 10-byte file.
  grpc::Status status = UploadTrainChunks(10, {{0, "01234"}, {7, "01234"}});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("does not fit"), std::string::npos)
      << status.error_message();
  absl::StatusOr<std::vector<DatasetChunkRef>> left =
      coordinator_->store().ListDatasetChunks(hash_);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty()) << left->size() << " chunks of the broken upload were kept";
  // A whole upload afterwards succeeds.
  v1::UploadDatasetResponse upload;
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_, 1000, &upload).ok());
  EXPECT_EQ(upload.files(), 4);
}

TEST_F(CoordinatorTest, AnUploadThatWouldEatTheDiskReserveIsRefused) {
  Restart({.min_free_disk_bytes = int64_t{1} << 62});  // more than any disk has
  grpc::Status status = UploadDirectory(*client_, data_dir_, hash_);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("--min-free-disk-gb"), std::string::npos)
      << status.error_message();
  absl::StatusOr<std::vector<DatasetChunkRef>> stored =
      coordinator_->store().ListDatasetChunks(hash_);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->empty());
  v1::HasDatasetRequest has;
  has.set_content_hash(hash_);
  v1::HasDatasetResponse present;
  ASSERT_TRUE(client_->HasDataset(Context().get(), has, &present).ok());
  EXPECT_FALSE(present.present());
}

TEST_F(CoordinatorTest, CheckpointUploadsInFlightAreCountedTogetherAgainstTheDiskReserve) {
  // Room above the reserve for one and a half checkpoints of 1 GiB each
  // (declared; a chunk of each is sent): a second upload started while the
  // first is in flight would eat the reserve.
  constexpr int64_t kDeclared = int64_t{1} << 30;
  const auto available =
      static_cast<int64_t>(std::filesystem::space(dir_.path()).available);
  Restart({.min_free_disk_bytes = available - kDeclared - kDeclared / 2});
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 3, &submitted);
  const v1::LeaseResponse first = Lease("w1"), second = Lease("w2"), third = Lease("w3");
  const std::string sha = Sha256Hex("a checkpoint of 1 GiB");
  auto first_chunk = [&](const v1::LeaseResponse& lease, const std::string& worker) {
    v1::CheckpointChunk chunk;
    chunk.set_worker_id(worker);
    chunk.set_run_id(lease.run_id());
    chunk.set_attempt(lease.attempt());
    chunk.set_step(10);
    chunk.set_sha256(sha);
    chunk.set_file_size(kDeclared);
    chunk.set_data("the first bytes");
    return chunk;
  };
  auto upload_one_chunk = [&](const v1::LeaseResponse& lease, const std::string& worker) {
    grpc::ClientContext context;
    v1::UploadCheckpointResponse response;
    auto writer = worker_->UploadCheckpoint(&context, &response);
    writer->Write(first_chunk(lease, worker));
    writer->WritesDone();
    return writer->Finish();
  };
  // The first upload sends a chunk and stays open.
  grpc::ClientContext open_context;
  v1::UploadCheckpointResponse open_response;
  auto open_writer = worker_->UploadCheckpoint(&open_context, &open_response);
  ASSERT_TRUE(open_writer->Write(first_chunk(first, "w1")));
  // Once its chunk is stored, its claim on the disk is held.
  while (coordinator_->store().ListCheckpointChunks(first.run_id(), sha)->empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const grpc::Status refused = upload_one_chunk(second, "w2");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("promised to uploads in flight"), std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(coordinator_->store().ListCheckpointChunks(second.run_id(), sha)->empty());
  // The first ends (incomplete) and gives its claim back: the next upload
  // passes the reserve (and is incomplete in its turn).
  open_writer->WritesDone();
  EXPECT_EQ(open_writer->Finish().error_code(), grpc::StatusCode::DATA_LOSS);
  const grpc::Status admitted = upload_one_chunk(third, "w3");
  EXPECT_EQ(admitted.error_code(), grpc::StatusCode::DATA_LOSS) << admitted.error_message();
}

TEST_F(CoordinatorTest, WorkerFetchesTheDatasetItUploadedByteForByte) {
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_, 700).ok());
  v1::FetchDatasetRequest request;
  request.set_content_hash(hash_);
  auto context = Context();
  auto reader = worker_->FetchDataset(context.get(), request);
  std::map<std::string, std::string> files;
  v1::DatasetChunk chunk;
  while (reader->Read(&chunk)) {
    std::string& f = files[chunk.file_name()];
    EXPECT_EQ(static_cast<int64_t>(f.size()), chunk.offset());
    f += chunk.data();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files["train.bin"], testing::ReadFile(data_dir_ + "/train.bin"));
}

TEST_F(CoordinatorTest, SubmitQueuesEveryCellAndResubmitAddsNothing) {
  v1::SubmitResponse response;
  UploadAndSubmit(3, 2, &response);
  EXPECT_EQ(response.experiment_name(), "exp");
  EXPECT_EQ(response.runs_added(), 6);
  ASSERT_TRUE(Submit(MakeGridYaml("exp", data_dir_, 3, 2), &response).ok());
  EXPECT_EQ(response.runs_added(), 0);
  EXPECT_EQ(response.runs_unchanged(), 6);
}

TEST_F(CoordinatorTest, LeaseHeartbeatCompleteRecordsTheResult) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  ASSERT_TRUE(lease.leased());
  EXPECT_EQ(lease.attempt(), 1);
  EXPECT_EQ(lease.dataset_hash(), hash_);
  EXPECT_NE(lease.spec_json().find(hash_), std::string::npos);

  v1::HeartbeatRequest beat;
  beat.set_worker_id("w1");
  beat.set_run_id(lease.run_id());
  beat.set_attempt(lease.attempt());
  v1::Progress* p = beat.add_points();
  p->set_step(10);
  p->set_total_steps(20);
  p->set_loss(4.5);
  v1::HeartbeatResponse beat_response;
  ASSERT_TRUE(worker_->Heartbeat(Context().get(), beat, &beat_response).ok());
  EXPECT_FALSE(beat_response.cancel());

  v1::CompleteResponse done;
  ASSERT_TRUE(Complete(lease, "w1", &done).ok());
  EXPECT_FALSE(done.duplicate());
  ASSERT_TRUE(Complete(lease, "w1", &done).ok());
  EXPECT_TRUE(done.duplicate());

  v1::GetRunRequest get;
  get.set_run_id(lease.run_id());
  v1::GetRunResponse run;
  ASSERT_TRUE(client_->GetRun(Context().get(), get, &run).ok());
  EXPECT_EQ(run.run().status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(run.run().progress().step(), 10);
  EXPECT_NE(run.run().result_json().find("1.25"), std::string::npos);
}

TEST_F(CoordinatorTest, CompletionFromExpiredAttemptIsRejected) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse first = Lease("w1");
  clock_.AdvanceMs(10'001);
  ASSERT_EQ(*coordinator_->queue().ReapExpiredLeases(), 1);
  v1::LeaseResponse second = Lease("w2");
  ASSERT_EQ(second.run_id(), first.run_id());
  EXPECT_EQ(second.attempt(), 2);
  grpc::Status late = Complete(first, "w1");
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Complete(second, "w2").ok());
}

TEST_F(CoordinatorTest, RestartKeepsEverySubmittedRunAndResult) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(2, 2, &submitted);
  v1::LeaseResponse lease = Lease();
  ASSERT_TRUE(Complete(lease).ok());
  Restart();
  v1::GetExperimentRequest get;
  get.set_name("exp");
  v1::GetExperimentResponse experiment;
  ASSERT_TRUE(client_->GetExperiment(Context().get(), get, &experiment).ok());
  ASSERT_EQ(experiment.runs_size(), 4);
  EXPECT_EQ(experiment.experiment().counts().succeeded(), 1);
  EXPECT_EQ(experiment.experiment().counts().queued(), 3);
  EXPECT_EQ(experiment.runs(0).status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_NE(experiment.runs(0).result_json().find("1.25"), std::string::npos);
  // The dataset survives too: a worker can still fetch it.
  v1::HasDatasetRequest has;
  has.set_content_hash(hash_);
  v1::HasDatasetResponse present;
  ASSERT_TRUE(client_->HasDataset(Context().get(), has, &present).ok());
  EXPECT_TRUE(present.present());
}

TEST_F(CoordinatorTest, RestartDropsPartialCheckpointUploadsAndKeepsCompleteOnes) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 2, &submitted);
  const v1::LeaseResponse whole = Lease("w1");
  const v1::LeaseResponse partial = Lease("w2");
  auto put = [&](const v1::LeaseResponse& lease, const std::string& worker,
                 const std::string& bytes, std::string_view data) {
    return coordinator_->store().PutCheckpointChunk(
        CheckpointRecord{.run_id = lease.run_id(), .sha256 = Sha256Hex(bytes),
                         .attempt = lease.attempt(), .step = 5,
                         .total_bytes = static_cast<int64_t>(bytes.size())},
        worker, 0, data, clock_.NowUnixMs());
  };
  ASSERT_TRUE(put(whole, "w1", "whole", "whole").ok());
  ASSERT_TRUE(coordinator_->store()
                  .CommitCheckpoint(whole.run_id(), whole.attempt(), "w1", Sha256Hex("whole"),
                                    clock_.NowUnixMs())
                  .ok());
  // The coordinator stops after the first chunk of a two-chunk upload.
  ASSERT_TRUE(put(partial, "w2", "half and half", "half ").ok());
  ASSERT_EQ(coordinator_->store().GetCheckpointUsage()->count, 2);
  Restart();
  const CheckpointUsage usage = *coordinator_->store().GetCheckpointUsage();
  EXPECT_EQ(usage.count, 1);
  EXPECT_EQ(usage.bytes, 5);
  EXPECT_TRUE(coordinator_->store().GetCheckpoint(whole.run_id())->has_value());
  EXPECT_TRUE(coordinator_->store().ListCheckpointChunks(partial.run_id(),
                                                         Sha256Hex("half and half"))->empty());
}

TEST_F(CoordinatorTest, AnAttemptNotHandedOutIsRefusedSayingSoNotSuperseded) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 2, &submitted);
  const v1::LeaseResponse lease = Lease("w1");
  // A later attempt than the lease's.
  v1::FetchCheckpointRequest fetch;
  fetch.set_worker_id("w1");
  fetch.set_run_id(lease.run_id());
  fetch.set_attempt(lease.attempt() + 1);
  grpc::ClientContext fetch_context;
  auto reader = worker_->FetchCheckpoint(&fetch_context, fetch);
  v1::CheckpointChunk ignored;
  while (reader->Read(&ignored)) {
  }
  grpc::Status fetched = reader->Finish();
  EXPECT_EQ(fetched.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(fetched.error_message().find("no such attempt: the run's latest attempt is 1"),
            std::string::npos)
      << fetched.error_message();
  EXPECT_EQ(fetched.error_message().find("superseded"), std::string::npos);
  // The other run, still queued, never leased.
  v1::CheckpointChunk chunk;
  chunk.set_worker_id("w1");
  chunk.set_run_id(lease.run_id() + 1);
  chunk.set_attempt(1);
  chunk.set_sha256(Sha256Hex("abcd"));
  chunk.set_file_size(4);
  chunk.set_data("abcd");
  grpc::ClientContext upload_context;
  v1::UploadCheckpointResponse uploaded;
  auto writer = worker_->UploadCheckpoint(&upload_context, &uploaded);
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status upload = writer->Finish();
  EXPECT_EQ(upload.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(upload.error_message().find("the run was never leased (it is queued)"),
            std::string::npos)
      << upload.error_message();
  EXPECT_EQ(upload.error_message().find("superseded"), std::string::npos);
}

TEST_F(CoordinatorTest, CancelReachesTheWorkerAtItsNextHeartbeat) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 2, &submitted);
  v1::LeaseResponse lease = Lease();
  v1::CancelRequest cancel;
  cancel.set_experiment_id(submitted.experiment_id());
  v1::CancelResponse cancelled;
  ASSERT_TRUE(client_->Cancel(Context().get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.cancelled(), 2);
  v1::HeartbeatRequest beat;
  beat.set_worker_id("w1");
  beat.set_run_id(lease.run_id());
  beat.set_attempt(lease.attempt());
  v1::HeartbeatResponse beat_response;
  ASSERT_TRUE(worker_->Heartbeat(Context().get(), beat, &beat_response).ok());
  EXPECT_TRUE(beat_response.cancel());
  v1::RetryRequest retry;
  retry.set_experiment_id(submitted.experiment_id());
  v1::RetryResponse retried;
  ASSERT_TRUE(client_->Retry(Context().get(), retry, &retried).ok());
  EXPECT_EQ(retried.requeued(), 2);
}

TEST_F(CoordinatorTest, StreamMetricsFollowsARunUntilItEnds) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  std::thread worker([&] {
    for (int step = 5; step <= 20; step += 5) {
      v1::HeartbeatRequest beat;
      beat.set_worker_id("w1");
      beat.set_run_id(lease.run_id());
      beat.set_attempt(lease.attempt());
      beat.add_points()->set_step(step);
      v1::HeartbeatResponse r;
      EXPECT_TRUE(worker_->Heartbeat(Context().get(), beat, &r).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(Complete(lease).ok());
  });
  v1::StreamMetricsRequest request;
  request.set_run_id(lease.run_id());
  request.set_after_step(-1);
  request.set_follow(true);
  auto context = Context(20);
  auto reader = client_->StreamMetrics(context.get(), request);
  std::vector<int64_t> steps;
  v1::StreamMetricsResponse response;
  v1::RunStatus last = v1::RUN_STATUS_UNSPECIFIED;
  while (reader->Read(&response)) {
    for (const v1::MetricPoint& p : response.points()) steps.push_back(p.step());
    last = response.run().status();
  }
  EXPECT_TRUE(reader->Finish().ok());
  worker.join();
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 10, 15, 20}));
  EXPECT_EQ(last, v1::RUN_STATUS_SUCCEEDED);
}

TEST_F(CoordinatorTest, ReportComparesFinishedVariants) {
  ASSERT_NO_FATAL_FAILURE(FinishTwoVariants());
  v1::ReportRequest request;
  request.set_name("exp");
  request.set_format(v1::REPORT_FORMAT_JSON);
  v1::ReportResponse report;
  grpc::Status status = client_->Report(Context().get(), request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.runs_done(), 2);
  nlohmann::json j = nlohmann::json::parse(report.text());
  EXPECT_EQ(j["baseline"], "v0");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][1]["verdict"], "undecided");
  EXPECT_EQ(j["rows"][1]["verdict_text"], "undecided: noise not measured");
}

TEST_F(CoordinatorTest, NoiseOnlyReportIsTheNoiseSectionAlone) {
  ASSERT_NO_FATAL_FAILURE(FinishTwoVariants());
  v1::ReportRequest request;
  request.set_name("exp");
  request.set_format(v1::REPORT_FORMAT_JSON);
  request.set_noise_only(true);
  request.set_at(v1::REPORT_AT_TIME);  // ignored: no reference curve needed for noise
  v1::ReportResponse report;
  grpc::Status status = client_->Report(Context().get(), request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  nlohmann::json j = nlohmann::json::parse(report.text());
  EXPECT_TRUE(j.contains("pooled_sigma"));
  EXPECT_TRUE(j.contains("pooled_df"));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_FALSE(j["rows"][0].contains("verdict"));  // noise rows, not comparison rows
  EXPECT_TRUE(j["rows"][0].contains("spread"));
}

TEST_F(CoordinatorTest, ReportSendsTheFigureAndRefusesEqualTimeWithoutAReferenceCurve) {
  ASSERT_NO_FATAL_FAILURE(FinishTwoVariants());
  v1::ReportRequest request;
  request.set_name("exp");
  request.set_plot(true);
  v1::ReportResponse report;
  grpc::Status status = client_->Report(Context().get(), request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(report.plot_svg().find("<svg"), std::string::npos);
  request.set_at(v1::REPORT_AT_TIME);
  status = client_->Report(Context().get(), request, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
}

TEST_F(CoordinatorTest, ListWorkersShowsDevicesAndLeasedRuns) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease("w7");
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(client_->ListWorkers(Context().get(), v1::ListWorkersRequest(), &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).worker_id(), "w7");
  ASSERT_EQ(workers.workers(0).devices_size(), 1);
  EXPECT_EQ(workers.workers(0).devices(0).device_class(), "cpu-test");
  ASSERT_EQ(workers.workers(0).leased_run_ids_size(), 1);
  EXPECT_EQ(workers.workers(0).leased_run_ids(0), lease.run_id());
}

TEST_F(CoordinatorTest, MalformedWorkerRequestsAreRejected) {
  v1::CompleteRequest request;  // no worker, run or attempt
  v1::CompleteResponse response;
  EXPECT_EQ(worker_->Complete(Context().get(), request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_worker_id("w1");
  request.set_run_id(1);
  request.set_attempt(1);
  request.set_result_json("not json");
  EXPECT_EQ(worker_->Complete(Context().get(), request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::RegisterRequest reg;  // no devices
  reg.set_worker_id("w1");
  v1::RegisterResponse reg_response;
  EXPECT_EQ(worker_->Register(Context().get(), reg, &reg_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace smallem
