#include "server/service/read_only_coordinator.h"

#include <chrono>

#include "base/clock.h"
#include "base/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rpc/limits.h"
#include "server/service/client_service.h"

namespace smallem {

absl::StatusOr<std::unique_ptr<ReadOnlyCoordinator>> ReadOnlyCoordinator::Open(
    const std::string& db_path) {
  const Clock* clock = SystemClock::Get();
  std::unique_ptr<ReadOnlyCoordinator> c(new ReadOnlyCoordinator());
  ASSIGN_OR_RETURN(c->store_, SqliteStore::OpenReadOnly(db_path));
  c->queue_ = std::make_unique<JobQueue>(c->store_.get(), clock, JobQueueOptions{});
  c->workers_ = std::make_unique<WorkerRegistry>(c->store_.get(), clock);
  c->service_ = std::make_unique<ClientServiceImpl>(c->store_.get(), c->queue_.get(),
                                                    c->workers_.get(), clock);
  grpc::ServerBuilder builder;  // no listening port: in-process calls only
  builder.RegisterService(c->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  c->server_ = builder.BuildAndStart();
  if (c->server_ == nullptr) {
    return absl::InternalError("cannot start the in-process service over " + db_path);
  }
  return c;
}

ReadOnlyCoordinator::~ReadOnlyCoordinator() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
}

std::shared_ptr<grpc::Channel> ReadOnlyCoordinator::channel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return server_->InProcessChannel(args);
}

}  // namespace smallem
