#include "worker/coordinator_client.h"

#include "grpcpp/grpcpp.h"
#include "rpc/grpc_status.h"

namespace smallem {

namespace {

// Hands each message of a server stream to `on_chunk`; the first error it
// returns cancels the call and is the result, else the stream's own status.
template <typename Chunk>
absl::Status ReadStream(grpc::ClientContext& context, grpc::ClientReader<Chunk>& reader,
                        const std::function<absl::Status(const Chunk&)>& on_chunk) {
  Chunk chunk;
  absl::Status handled;
  while (handled.ok() && reader.Read(&chunk)) handled = on_chunk(chunk);
  if (!handled.ok()) {
    context.TryCancel();
    reader.Finish().ok();
    return handled;
  }
  return FromGrpcStatus(reader.Finish());
}

}  // namespace

bool IsTransient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kAborted ||
         status.code() == absl::StatusCode::kResourceExhausted ||
         status.code() == absl::StatusCode::kInternal ||
         status.code() == absl::StatusCode::kUnknown;
}

template <typename Response, typename Call>
absl::StatusOr<Response> CoordinatorClient::Unary(Call call) {
  Response response;
  auto context = channel_.NewCallContext(deadline_);
  grpc::Status status = call(context.get(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

CoordinatorClient::CoordinatorClient(const std::string& address, absl::Duration deadline,
                                     const ChannelSecurity& security)
    // Reconnect quickly once the coordinator is back (gRPC's default backoff
    // grows to two minutes).
    : channel_(address, {.security = security,
                         .initial_reconnect_backoff = absl::Milliseconds(200),
                         .max_reconnect_backoff = absl::Seconds(2)}),
      stub_(v1::WorkerService::NewStub(channel_.channel())),
      deadline_(deadline) {}

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

absl::StatusOr<v1::ReleaseResponse> CoordinatorClient::Release(const v1::ReleaseRequest& r) {
  return Unary<v1::ReleaseResponse>([&](grpc::ClientContext* c, auto* out) {
    return stub_->Release(c, r, out);
  });
}

absl::Status CoordinatorClient::FetchDataset(
    const std::string& content_hash, absl::Duration deadline,
    const std::function<absl::Status(const v1::DatasetChunk&)>& on_chunk) {
  auto context = channel_.NewCallContext(deadline);
  v1::FetchDatasetRequest request;
  request.set_content_hash(content_hash);
  return ReadStream(*context, *stub_->FetchDataset(context.get(), request), on_chunk);
}

absl::StatusOr<v1::UploadCheckpointResponse> CoordinatorClient::UploadCheckpoint(
    absl::Duration deadline,
    const std::function<absl::StatusOr<bool>(v1::CheckpointChunk*)>& next) {
  auto context = channel_.NewCallContext(deadline);
  v1::UploadCheckpointResponse response;
  auto writer = stub_->UploadCheckpoint(context.get(), &response);
  while (true) {
    v1::CheckpointChunk chunk;
    absl::StatusOr<bool> more = next(&chunk);
    if (!more.ok()) {
      context->TryCancel();
      writer->Finish().ok();
      return more.status();
    }
    if (!*more) break;
    // A failed write means the call ended; Finish says why.
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status CoordinatorClient::FetchCheckpoint(
    const v1::FetchCheckpointRequest& request, absl::Duration deadline,
    const std::function<absl::Status(const v1::CheckpointChunk&)>& on_chunk) {
  auto context = channel_.NewCallContext(deadline);
  return ReadStream(*context, *stub_->FetchCheckpoint(context.get(), request), on_chunk);
}

}  // namespace smallem
