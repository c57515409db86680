#include "server/service/stream_gate.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace smallem {

StreamGate::Ticket::Ticket(StreamGate* gate, grpc::ServerContext* context)
    : gate_(gate), context_(context), last_progress_(absl::Now()) {}

StreamGate::Ticket::~Ticket() {
  absl::MutexLock lock(&gate_->mu_);
  gate_->open_.erase(this);
}

void StreamGate::Ticket::Progress() {
  absl::MutexLock lock(&gate_->mu_);
  last_progress_ = absl::Now();
}

bool StreamGate::Ticket::idled_out() const {
  absl::MutexLock lock(&gate_->mu_);
  return idled_out_;
}

absl::Status StreamGate::Ticket::IdleError() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "the ", gate_->rpc_, " stream read or wrote nothing for ",
      absl::FormatDuration(gate_->limits_.idle), "; the coordinator ended it"));
}

StreamGate::StreamGate(std::string rpc, StreamLimits limits)
    : rpc_(std::move(rpc)), limits_(limits), watchdog_([this] { Watch(); }) {}

StreamGate::~StreamGate() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  watchdog_.join();
}

absl::StatusOr<std::unique_ptr<StreamGate::Ticket>> StreamGate::Enter(
    grpc::ServerContext* context) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(open_.size()) >= limits_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        limits_.max_streams, " ", rpc_, " stream", limits_.max_streams == 1 ? " is" : "s are",
        " open on this coordinator already (each holds a server thread); try again when one "
        "ends"));
  }
  std::unique_ptr<Ticket> ticket(new Ticket(this, context));
  open_.insert(ticket.get());
  wake_.Signal();
  return ticket;
}

void StreamGate::Watch() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    absl::Time wake = absl::InfiniteFuture();
    for (Ticket* t : open_) {
      if (t->idled_out_) continue;
      const absl::Time deadline = t->last_progress_ + limits_.idle;
      if (deadline <= now) {
        // Read and Write return false from now on; the handler ends and
        // its ticket leaves the set.
        t->context_->TryCancel();
        t->idled_out_ = true;
      } else if (deadline < wake) {
        wake = deadline;
      }
    }
    // Woken early by a new stream (its deadline may be the earliest) and
    // by the destructor; Progress only moves deadlines later.
    wake_.WaitWithDeadline(&mu_, wake);
  }
}

}  // namespace smallem
