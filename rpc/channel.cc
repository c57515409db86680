#include "rpc/channel.h"

#include <utility>

#include "base/check.h"
#include "grpcpp/grpcpp.h"
#include "rpc/limits.h"

namespace smallem {

ClientChannel::ClientChannel(const std::string& address, const ChannelOptions& options)
    : address_(address), token_(options.security.token) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  if (options.initial_reconnect_backoff > absl::ZeroDuration()) {
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options.initial_reconnect_backoff)));
  }
  if (options.max_reconnect_backoff > absl::ZeroDuration()) {
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options.max_reconnect_backoff)));
  }
  channel_ = grpc::CreateCustomChannel(address, MakeChannelCredentials(options.security), args);
}

ClientChannel::ClientChannel(std::shared_ptr<grpc::Channel> channel, const std::string& name)
    : address_(name), channel_(std::move(channel)) {}

std::unique_ptr<grpc::ClientContext> ClientChannel::NewCallContext(absl::Duration deadline) const {
  CHECK(deadline > absl::ZeroDuration() && deadline < absl::InfiniteDuration());
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AttachToken(token_, context.get());
  return context;
}

}  // namespace smallem
