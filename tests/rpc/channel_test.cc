// ClientChannel against an in-process gRPC server on 127.0.0.1:0 serving a
// fake smallem.v1.WorkerService that records what each call carried.
#include "rpc/channel.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "smallem/v1/worker.grpc.pb.h"

namespace smallem {
namespace {

// More than gRPC's default receive limit (4 MiB), less than kMaxMessageBytes.
constexpr size_t kBigChunkBytes = size_t{5} << 20;

class FakeWorkerService final : public v1::WorkerService::Service {
 public:
  // Records the call's authorization header and deadline.
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest*,
                        v1::RegisterResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    authorization_ = it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
    deadline_ = context->deadline();
    return grpc::Status::OK;
  }

  // Answers only once the caller has given up.
  grpc::Status Lease(grpc::ServerContext* context, const v1::LeaseRequest*,
                     v1::LeaseResponse*) override {
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return grpc::Status::CANCELLED;
  }

  // One chunk bigger than gRPC lets a client receive by default.
  grpc::Status FetchDataset(grpc::ServerContext*, const v1::FetchDatasetRequest*,
                            grpc::ServerWriter<v1::DatasetChunk>* writer) override {
    v1::DatasetChunk chunk;
    chunk.set_data(std::string(kBigChunkBytes, 'x'));
    writer->Write(chunk);
    return grpc::Status::OK;
  }

  std::string authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }
  std::chrono::system_clock::time_point deadline() {
    std::lock_guard<std::mutex> lock(mu_);
    return deadline_;
  }

 private:
  std::mutex mu_;
  std::string authorization_;
  std::chrono::system_clock::time_point deadline_;
};

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  FakeWorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ChannelTest, CallCarriesTheTokenAndEndsWithinItsDeadline) {
  ClientChannel channel(address_, {.security = {.token = "worker-token-1"}});
  auto stub = v1::WorkerService::NewStub(channel.channel());
  v1::RegisterResponse response;
  const auto before = std::chrono::system_clock::now();
  grpc::Status status =
      stub->Register(channel.NewCallContext(absl::Seconds(7)).get(), {}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(service_.authorization(), "Bearer worker-token-1");
  const auto deadline = service_.deadline();
  // The server sees the client's 7 s, within a second either way: gRPC
  // sends the time left rounded up to its wire units (100 ms at this size),
  // and the server converts its monotonic deadline to wall-clock time by
  // reading both clocks, which a loaded machine can preempt in between
  // (the former 100 ms upper margin failed once in a full `ctest -j2` run
  // beside a benchmark, 2026-12-02). No deadline, or the default, is far
  // outside either margin.
  EXPECT_GT(deadline, before + std::chrono::seconds(6));
  EXPECT_LE(deadline, std::chrono::system_clock::now() + std::chrono::seconds(8));
}

TEST_F(ChannelTest, NoTokenSendsNoAuthorizationHeader) {
  ClientChannel channel(address_, {});
  auto stub = v1::WorkerService::NewStub(channel.channel());
  v1::RegisterResponse response;
  ASSERT_TRUE(stub->Register(channel.NewCallContext(absl::Seconds(10)).get(), {}, &response).ok());
  EXPECT_EQ(service_.authorization(), "");
}

TEST_F(ChannelTest, SlowCallFailsAtItsDeadline) {
  ClientChannel channel(address_, {});
  auto stub = v1::WorkerService::NewStub(channel.channel());
  v1::LeaseResponse response;
  grpc::Status status =
      stub->Lease(channel.NewCallContext(absl::Milliseconds(200)).get(), {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
}

TEST_F(ChannelTest, ReceivesMessagesBeyondGrpcsDefaultLimit) {
  auto fetch = [](v1::WorkerService::Stub& stub, grpc::ClientContext* context) {
    auto reader = stub.FetchDataset(context, {});
    v1::DatasetChunk chunk;
    size_t bytes = 0;
    while (reader->Read(&chunk)) bytes += chunk.data().size();
    grpc::Status status = reader->Finish();
    return std::make_pair(status, bytes);
  };
  ClientChannel channel(address_, {});
  auto stub = v1::WorkerService::NewStub(channel.channel());
  auto [status, bytes] = fetch(*stub, channel.NewCallContext(absl::Seconds(10)).get());
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(bytes, kBigChunkBytes);

  // The limit is what makes the difference: a default channel refuses it.
  auto plain = v1::WorkerService::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(fetch(*plain, &context).first.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ChannelTest, UnreachableAddressFailsOnTheFirstCallNotBefore) {
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  ClientChannel channel(address_, {.initial_reconnect_backoff = absl::Milliseconds(100),
                                   .max_reconnect_backoff = absl::Seconds(1)});
  EXPECT_EQ(channel.address(), address_);
  auto stub = v1::WorkerService::NewStub(channel.channel());
  v1::RegisterResponse response;
  grpc::Status status =
      stub->Register(channel.NewCallContext(absl::Seconds(10)).get(), {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

}  // namespace
}  // namespace smallem
