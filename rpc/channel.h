// ClientChannel: a client's connection to the coordinator — the one place
// where smallemctl and the worker daemon set a channel's credentials
// (rpc/auth.h), its message limits (rpc/limits.h) and its reconnect pacing,
// and give each call its deadline and token.
//
// Every client call has a deadline, as an absl::Duration
// from the moment the call's context is made. The token, when there is one,
// travels per call as `authorization: Bearer <token>` (AttachToken: gRPC
// sends call credentials over TLS only, and a loopback coordinator is
// plaintext).
//
// Thread-safe: the channel is shared by the stubs made on it, and contexts
// may be made from any thread (each context belongs to one call).
#ifndef SMALLEM_RPC_CHANNEL_H_
#define SMALLEM_RPC_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "rpc/auth.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace smallem {

struct ChannelOptions {
  ChannelSecurity security;  // the token and TLS root; none = plaintext, no token
  // How soon gRPC dials again after losing the server: its first wait and
  // the longest it grows to. Zero keeps gRPC's defaults (1 s, growing to
  // 120 s) — too slow for a daemon that must be back at work soon after
  // its coordinator restarts.
  absl::Duration initial_reconnect_backoff = absl::ZeroDuration();
  absl::Duration max_reconnect_backoff = absl::ZeroDuration();
};

class ClientChannel {
 public:
  // A channel to `address` (host:port) that sends and receives messages of
  // up to kMaxMessageBytes. Connects lazily: an unreachable address shows
  // as Unavailable on the first call, never here.
  ClientChannel(const std::string& address, const ChannelOptions& options);
  // A channel made elsewhere (an in-process server's,
  // server/service/read_only_coordinator.h), sending no token; `name`
  // stands for its address in messages.
  ClientChannel(std::shared_ptr<grpc::Channel> channel, const std::string& name);

  const std::string& address() const { return address_; }
  // For making stubs (v1::ClientService::NewStub(channel.channel())).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context for one call that must end within `deadline` of now (a
  // positive, finite duration), with the token attached. The caller owns it.
  std::unique_ptr<grpc::ClientContext> NewCallContext(absl::Duration deadline) const;

 private:
  std::string address_;
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace smallem

#endif  // SMALLEM_RPC_CHANNEL_H_
