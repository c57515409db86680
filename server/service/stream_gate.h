// StreamGate: the streams of one rpc (UploadCheckpoint, FetchCheckpoint,
// UploadDataset, Backup) open at once, and how long each may sit idle.
// Every stream holds one of gRPC's server threads for as long as it lasts,
// so their number is capped (one more is refused with ResourceExhausted,
// as StreamMetrics' followers are), and a stream that makes no progress —
// no chunk read or written — for the idle limit is cancelled from the
// server (ServerContext::TryCancel): a client that opens a stream and then
// sends or reads nothing gives its thread back.
//
// Thread-safe. A watchdog thread of the gate's own sleeps until the
// earliest idle deadline of the streams open (indefinitely when none is).
#ifndef SMALLEM_SERVER_SERVICE_STREAM_GATE_H_
#define SMALLEM_SERVER_SERVICE_STREAM_GATE_H_

#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace smallem {

// The bounds on one rpc's streams (CoordinatorOptions).
struct StreamLimits {
  int max_streams = 64;                    // open at once
  absl::Duration idle = absl::Seconds(60);  // without a chunk read or written
};

class StreamGate {
 public:
  // One open stream, admitted by Enter; destroying it closes it.
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // A chunk was read or written: the idle deadline starts over.
    void Progress();
    // Whether the gate cancelled the stream for sitting idle: its reads and
    // writes fail, and what it stored is to be dropped.
    bool idled_out() const;
    // DeadlineExceeded saying the stream sat idle past the limit: what its
    // handler returns once idled_out (the client sees CANCELLED).
    absl::Status IdleError() const;

   private:
    friend class StreamGate;
    Ticket(StreamGate* gate, grpc::ServerContext* context);

    StreamGate* const gate_;
    grpc::ServerContext* const context_;
    absl::Time last_progress_;  // guarded by gate_->mu_
    bool idled_out_ = false;    // guarded by gate_->mu_
  };

  // `rpc` names the streams in messages ("UploadCheckpoint").
  StreamGate(std::string rpc, StreamLimits limits);
  // REQUIRES: no Ticket left.
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Admits the stream of `context` (which must outlive the ticket).
  // ResourceExhausted when limits.max_streams are open already.
  absl::StatusOr<std::unique_ptr<Ticket>> Enter(grpc::ServerContext* context);

 private:
  void Watch();

  const std::string rpc_;
  const StreamLimits limits_;
  absl::Mutex mu_;
  std::set<Ticket*> open_ ABSL_GUARDED_BY(mu_);
  absl::CondVar wake_;  // a stream entered, or the gate stops
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_STREAM_GATE_H_
