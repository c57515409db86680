// WorkerGridTest: the fixture of the end-to-end tests that run a grid on
// real smallem-worker processes against an in-process coordinator — a tiny
// dataset prepared in the test, its upload and submission, workers spawned
// with one thread each, and a poll that drains their output.
#ifndef SMALLEM_TESTS_E2E_WORKER_GRID_FIXTURE_H_
#define SMALLEM_TESTS_E2E_WORKER_GRID_FIXTURE_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "corpus/dataset.h"
#include "gtest/gtest.h"
#include "runspec/grid.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem::testing {

class WorkerGridTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    data_dir_ = dir_.Join("data");
    ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data_dir_).ok());
    hash_ = Dataset::Open(data_dir_)->content_hash();
  }

  // Submits `yaml` to the coordinator at `address` (uploading the dataset).
  void Submit(const std::string& address, const std::string& yaml) {
    auto client = v1::ClientService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(testing::UploadDirectory(*client, data_dir_, hash_, 64 << 10).ok());
    v1::SubmitRequest request;
    request.set_grid_yaml(yaml);
    request.set_grid_file_name("grid.yaml");
    (*request.mutable_dataset_hashes())[ParseGrid(yaml, "grid.yaml")->data_dir] = hash_;
    v1::SubmitResponse response;
    grpc::Status status = client->Submit(testing::Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::unique_ptr<ChildProcess> SpawnWorker(const std::string& address, const std::string& id) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> worker = ChildProcess::Spawn(
        testing::WorkerBinary(), {"--coordinator", address, "--devices", "cpu", "--cache",
                                  dir_.Join("cache-" + id), "--id", id, "--threads", "1",
                                  "--log-level", "warn"});
    EXPECT_TRUE(worker.ok()) << worker.status();
    return std::move(*worker);
  }

  // Polls `done` every 50 ms for up to `seconds`, draining the workers'
  // output so their pipes never fill.
  template <typename Done>
  bool WaitFor(Done done, int seconds, std::vector<ChildProcess*> workers = {}) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (done()) return true;
      std::vector<std::string> lines;
      for (ChildProcess* w : workers) w->Poll(0, &lines);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  TempDir dir_;
  std::string data_dir_;
  std::string hash_;
};

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_E2E_WORKER_GRID_FIXTURE_H_
