// CoordinatorClient: the worker's side of smallem.v1.WorkerService. Every
// call has a deadline and fails fast when the coordinator is unreachable
// (Unavailable / DeadlineExceeded: the daemon backs off and retries);
// FailedPrecondition and NotFound mean the attempt is no longer this
// worker's to run. The channel (rpc/channel.h) dials a lost coordinator
// again within seconds, not gRPC's default minutes.
//
// With a token, every call carries `authorization: Bearer <token>`; a wrong
// one fails Unauthenticated, which is not transient. With a root
// certificate the channel is TLS.
//
// Thread-safe (gRPC stubs are).
#ifndef SMALLEM_WORKER_COORDINATOR_CLIENT_H_
#define SMALLEM_WORKER_COORDINATOR_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "smallem/v1/worker.grpc.pb.h"

namespace smallem {

class CoordinatorClient {
 public:
  // `address` is host:port; calls other than FetchDataset time out after
  // `deadline`. `security`: the worker token and TLS root, if any.
  explicit CoordinatorClient(const std::string& address,
                             absl::Duration deadline = absl::Seconds(10),
                             const ChannelSecurity& security = {});

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& request);
  absl::StatusOr<v1::FailResponse> Fail(const v1::FailRequest& request);
  absl::StatusOr<v1::ReleaseResponse> Release(const v1::ReleaseRequest& request);
  // Streams the dataset's chunks to `on_chunk` (which may stop the fetch by
  // returning an error). The whole fetch must end within `deadline`.
  absl::Status FetchDataset(const std::string& content_hash, absl::Duration deadline,
                            const std::function<absl::Status(const v1::DatasetChunk&)>& on_chunk);
  // Streams the chunks `next` yields (it returns false after the last, or
  // an error that cancels the upload) as one checkpoint upload; the whole
  // upload must end within `deadline`.
  absl::StatusOr<v1::UploadCheckpointResponse> UploadCheckpoint(
      absl::Duration deadline,
      const std::function<absl::StatusOr<bool>(v1::CheckpointChunk*)>& next);
  // Streams the run's checkpoint to `on_chunk`, as FetchDataset does.
  absl::Status FetchCheckpoint(const v1::FetchCheckpointRequest& request,
                               absl::Duration deadline,
                               const std::function<absl::Status(const v1::CheckpointChunk&)>& on_chunk);

 private:
  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(Call call);

  ClientChannel channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  absl::Duration deadline_;
};

// True for errors after which the same call may succeed later (the
// coordinator is restarting, the network hiccuped, the database was busy).
bool IsTransient(const absl::Status& status);

}  // namespace smallem

#endif  // SMALLEM_WORKER_COORDINATOR_CLIENT_H_
