// CoordinatorTest: a real Coordinator on 127.0.0.1 port 0 over a real SQLite
// file in a temporary directory, a manual clock (no reaper thread: tests
// reap by hand), an uploaded fake dataset and stubs of both services.
#ifndef SMALLEM_TESTS_SERVER_COORDINATOR_FIXTURE_H_
#define SMALLEM_TESTS_SERVER_COORDINATOR_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "server/service/coordinator.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = dir_.Join("data");
    hash_ = testing::WriteFakeDataset(data_dir_);
    Start();
  }

  // Starts a coordinator with these options (listen, database, clock and
  // reaper are the fixture's).
  void Start(CoordinatorOptions options = {}) {
    options.listen = "127.0.0.1:0";
    options.db_path = dir_.Join("smallem.db");
    options.clock = &clock_;
    options.reaper = false;  // tests reap by hand, with the manual clock
    options.queue.lease_duration_ms = 10'000;
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    ASSERT_GT(coordinator_->port(), 0);
    auto channel = grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials());
    client_ = v1::ClientService::NewStub(channel);
    worker_ = v1::WorkerService::NewStub(channel);
  }

  // Streams chunks (offset, bytes) of a train.bin of `file_size` bytes for
  // this test's dataset, and returns the upload's status.
  grpc::Status UploadTrainChunks(int64_t file_size,
                                 const std::vector<std::pair<int64_t, std::string>>& chunks) {
    grpc::ClientContext context;
    v1::UploadDatasetResponse response;
    auto writer = client_->UploadDataset(&context, &response);
    for (const auto& [offset, data] : chunks) {
      v1::DatasetChunk chunk;
      chunk.set_content_hash(hash_);
      chunk.set_file_name("train.bin");
      chunk.set_file_size(file_size);
      chunk.set_offset(offset);
      chunk.set_data(data);
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // Stops the coordinator and starts another on the same database.
  void Restart(CoordinatorOptions options = {}) {
    client_.reset();
    worker_.reset();
    coordinator_.reset();
    Start(std::move(options));
  }

  grpc::Status Submit(const std::string& yaml, v1::SubmitResponse* response,
                      const std::string& file_name = "grid.yaml") {
    v1::SubmitRequest request;
    request.set_grid_yaml(yaml);
    request.set_grid_file_name(file_name);
    absl::StatusOr<Grid> grid = ParseGrid(yaml, file_name);
    if (grid.ok()) (*request.mutable_dataset_hashes())[grid->data_dir] = hash_;
    return client_->Submit(testing::Context().get(), request, response);
  }

  void UploadAndSubmit(int variants, int seeds, v1::SubmitResponse* response) {
    ASSERT_TRUE(testing::UploadDirectory(*client_, data_dir_, hash_).ok());
    grpc::Status status =
        Submit(testing::MakeGridYaml("exp", data_dir_, variants, seeds), response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Two variants of one seed, both leased and completed.
  void FinishTwoVariants() {
    v1::SubmitResponse submitted;
    UploadAndSubmit(2, 1, &submitted);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(Complete(Lease()).ok());
  }

  v1::LeaseResponse Lease(const std::string& worker = "w1") {
    v1::RegisterRequest reg = testing::CpuRegistration();
    reg.set_worker_id(worker);
    v1::RegisterResponse reg_response;
    EXPECT_TRUE(worker_->Register(testing::Context().get(), reg, &reg_response).ok());
    v1::LeaseRequest request;
    request.set_worker_id(worker);
    request.set_device("cpu");
    request.set_device_class("cpu-test");
    v1::LeaseResponse response;
    grpc::Status status = worker_->Lease(testing::Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  grpc::Status Complete(const v1::LeaseResponse& lease, const std::string& worker = "w1",
                        v1::CompleteResponse* response = nullptr) {
    v1::CompleteResponse ignored;
    v1::CompleteRequest request;
    request.set_worker_id(worker);
    request.set_run_id(lease.run_id());
    request.set_attempt(lease.attempt());
    request.set_result_json(R"({"val_nats_per_byte":1.25,"train_seconds":3.0,"params":1000,)"
                            R"("device_class":"cpu-test"})");
    return worker_->Complete(testing::Context().get(), request, response ? response : &ignored);
  }

  testing::TempDir dir_;
  ManualClock clock_;
  std::string data_dir_;
  std::string hash_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<v1::ClientService::Stub> client_;
  std::unique_ptr<v1::WorkerService::Stub> worker_;
};

}  // namespace smallem

#endif  // SMALLEM_TESTS_SERVER_COORDINATOR_FIXTURE_H_
