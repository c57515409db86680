// The one place where absl::Status and grpc::Status meet.
// Codes map one to one (both follow google.rpc.Code); messages travel as
// they are.
#ifndef SMALLEM_RPC_GRPC_STATUS_H_
#define SMALLEM_RPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace smallem {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace smallem

#endif  // SMALLEM_RPC_GRPC_STATUS_H_
