#include "rpc/grpc_status.h"

#include <string>
#include <string_view>

#include "base/text.h"

namespace smallem {
namespace {

// A message travels in a response header, which a client refuses past 8 KiB
// (rpc/limits.h, kMaxMetadataBytes) after percent-encoding (up to 3 bytes
// per byte): an error that quotes a huge request field is cut here, once,
// on a character boundary, so that it reaches the client as the error it is.
constexpr size_t kMaxMessageBytes = 2000;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const absl::string_view message = status.message();
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      SanitizeText(std::string_view(message.data(), message.size()),
                                   kMaxMessageBytes));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace smallem
