// The security probe as a test: every rpc of both services, found in the
// generated descriptors (a new rpc is covered the day it is added), called
// with no token, a wrong token, the other role's token and its own token.
// Only its own token gets past authentication; the table is the one in
// docs/security.md.
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"
#include "server/service/coordinator.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

constexpr char kWorkerToken[] = "worker-token-5d0e8a61";
constexpr char kClientToken[] = "client-token-93b7c2f4";

struct Rpc {
  std::string path;      // "/smallem.v1.ClientService/Submit"
  std::string own;       // the token its role carries
  std::string other;     // the other role's token
};

std::vector<Rpc> EveryRpc() {
  std::vector<Rpc> rpcs;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const auto& [service, own, other] :
       {std::tuple{"smallem.v1.ClientService", kClientToken, kWorkerToken},
        std::tuple{"smallem.v1.WorkerService", kWorkerToken, kClientToken}}) {
    const google::protobuf::ServiceDescriptor* s = pool->FindServiceByName(service);
    if (s == nullptr) continue;
    for (int i = 0; i < s->method_count(); ++i) {
      rpcs.push_back({absl::StrCat("/", service, "/", s->method(i)->name()), own, other});
    }
  }
  return rpcs;
}

// Calls `method` with one empty request message, whatever its streaming
// kind, and returns how the call ended.
grpc::Status CallWithEmptyRequest(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& method, const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!token.empty()) AttachToken(token, &context);
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  void* tag = nullptr;
  bool ok = false;
  auto wait = [&](intptr_t expected) {
    EXPECT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (wait(1)) {
    grpc::ByteBuffer empty;
    grpc::Slice nothing;
    empty = grpc::ByteBuffer(&nothing, 1);
    call->Write(empty, reinterpret_cast<void*>(2));
    if (wait(2)) {
      call->WritesDone(reinterpret_cast<void*>(3));
      wait(3);
    }
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(4));
    wait(4);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  wait(5);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

class AuthMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = dir_.Join("smallem.db");
    options.reaper = false;
    options.security = {.worker_token = kWorkerToken, .client_token = kClientToken};
    absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    channel_ = grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials());
  }

  testing::TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(AuthMatrixTest, EveryRpcAcceptsItsOwnRolesTokenAndNothingElse) {
  const std::vector<Rpc> rpcs = EveryRpc();
  ASSERT_GE(rpcs.size(), 17u) << "the services' descriptors were not found";
  for (const Rpc& rpc : rpcs) {
    SCOPED_TRACE(rpc.path);
    for (const auto& [who, token] : {std::pair{"no token", std::string()},
                                     std::pair{"wrong token", std::string("not-a-real-token-0")},
                                     std::pair{"other role", rpc.other}}) {
      const grpc::Status status = CallWithEmptyRequest(channel_, rpc.path, token);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << who << ": " << status.error_message();
    }
    // Its own token passes authentication: what follows is the handler's
    // answer to an empty request (a refusal of its content, or success).
    const grpc::Status status = CallWithEmptyRequest(channel_, rpc.path, rpc.own);
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
  }
}

}  // namespace
}  // namespace smallem
