// The one place where absl::Status and grpc::Status meet.
// Codes map one to one (both follow google.rpc.Code); a message travels as
// it is, except that one sent to a client is made valid UTF-8 and cut to
// 2000 bytes (it travels in a header the client caps at 8 KiB).
#ifndef SMALLEM_RPC_GRPC_STATUS_H_
#define SMALLEM_RPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace smallem {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace smallem

#endif  // SMALLEM_RPC_GRPC_STATUS_H_
