#include "worker/coordinator_client.h"

#include <chrono>

#include "grpcpp/grpcpp.h"
#include "rpc/grpc_status.h"
#include "rpc/limits.h"

namespace smallem {

bool IsTransient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kAborted ||
         status.code() == absl::StatusCode::kResourceExhausted ||
         status.code() == absl::StatusCode::kInternal ||
         status.code() == absl::StatusCode::kUnknown;
}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::NewContext(int64_t deadline_ms) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(deadline_ms));
  AttachToken(token_, context.get());
  return context;
}

template <typename Response, typename Call>
absl::StatusOr<Response> CoordinatorClient::Unary(Call call) {
  Response response;
  auto context = NewContext(deadline_ms_);
  grpc::Status status = call(context.get(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

CoordinatorClient::CoordinatorClient(const std::string& address, int64_t deadline_ms,
                                     ChannelSecurity security)
    : deadline_ms_(deadline_ms), token_(security.token) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly once the coordinator is back (gRPC's default backoff
  // grows to two minutes).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  stub_ = v1::WorkerService::NewStub(
      grpc::CreateCustomChannel(address, MakeChannelCredentials(security), args));
}

absl::StatusOr<v1::RegisterResponse> CoordinatorClient::Register(const v1::RegisterRequest& r) {
  return Unary<v1::RegisterResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Register(c, r, out);
  });
}

absl::StatusOr<v1::LeaseResponse> CoordinatorClient::Lease(const v1::LeaseRequest& r) {
  return Unary<v1::LeaseResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Lease(c, r, out);
  });
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(const v1::HeartbeatRequest& r) {
  return Unary<v1::HeartbeatResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Heartbeat(c, r, out);
  });
}

absl::StatusOr<v1::CompleteResponse> CoordinatorClient::Complete(const v1::CompleteRequest& r) {
  return Unary<v1::CompleteResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Complete(c, r, out);
  });
}

absl::StatusOr<v1::FailResponse> CoordinatorClient::Fail(const v1::FailRequest& r) {
  return Unary<v1::FailResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Fail(c, r, out);
  });
}

absl::Status CoordinatorClient::FetchDataset(
    const std::string& content_hash, int64_t deadline_s,
    const std::function<absl::Status(const v1::DatasetChunk&)>& on_chunk) {
  auto context = NewContext(deadline_s * 1000);
  v1::FetchDatasetRequest request;
  request.set_content_hash(content_hash);
  auto reader = stub_->FetchDataset(context.get(), request);
  v1::DatasetChunk chunk;
  absl::Status handled;
  while (handled.ok() && reader->Read(&chunk)) handled = on_chunk(chunk);
  if (!handled.ok()) {
    context->TryCancel();
    reader->Finish().ok();
    return handled;
  }
  return FromGrpcStatus(reader->Finish());
}

}  // namespace smallem
