// CoordinatorClient against a real Coordinator that requires the worker
// token (127.0.0.1:0, real SQLite file): the token travels on every call,
// streaming ones included, and a missing one is not worth retrying.
#include "worker/coordinator_client.h"

#include <memory>

#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::TempDir;

constexpr char kWorkerToken[] = "worker-token-5d1e";

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = dir_.Join("smallem.db");
    options.reaper = false;
    options.security.worker_token = kWorkerToken;  // the client service stays open
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
  }

  TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorClientTest, WorkerTokenOpensTheWorkerService) {
  CoordinatorClient client(coordinator_->address(), absl::Seconds(10), {.token = kWorkerToken});
  absl::StatusOr<v1::RegisterResponse> registered = client.Register(testing::CpuRegistration());
  EXPECT_TRUE(registered.ok()) << registered.status();
}

TEST_F(CoordinatorClientTest, MissingTokenIsUnauthenticatedAndNotTransient) {
  CoordinatorClient client(coordinator_->address());
  absl::StatusOr<v1::RegisterResponse> registered = client.Register(testing::CpuRegistration());
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(registered.status().message().find("worker token"), std::string::npos);
  EXPECT_FALSE(IsTransient(registered.status()));
}

TEST_F(CoordinatorClientTest, FetchDatasetCarriesTheToken) {
  const std::string data = dir_.Join("data");
  const std::string hash = testing::WriteFakeDataset(data);
  auto upload = v1::ClientService::NewStub(
      grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(testing::UploadDirectory(*upload, data, hash).ok());

  int64_t bytes = 0;
  auto count = [&](const v1::DatasetChunk& chunk) {
    bytes += static_cast<int64_t>(chunk.data().size());
    return absl::OkStatus();
  };
  CoordinatorClient with_token(coordinator_->address(), absl::Seconds(10), {.token = kWorkerToken});
  absl::Status fetched = with_token.FetchDataset(hash, absl::Seconds(10), count);
  EXPECT_TRUE(fetched.ok()) << fetched;
  EXPECT_GT(bytes, 0);

  CoordinatorClient without(coordinator_->address());
  EXPECT_EQ(without.FetchDataset(hash, absl::Seconds(10), count).code(), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace smallem
