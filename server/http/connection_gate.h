// ConnectionGate: the dashboard's front door. It listens on the dashboard's
// address and lets a connection through to the HTTP server behind it
// (cpp-httplib, on a loopback port of its own) only once it is worth a
// server thread:
//
//  * at most max_per_peer connections from one address are open at once
//    (in the gate or through it); one more is closed at once;
//  * a plain-HTTP connection must send its whole request head (up to the
//    blank line) within head_deadline; until then it waits in the gate's one
//    poll thread, holding no server thread, and is closed when the deadline
//    passes or its head outgrows max_head_bytes. (Over TLS the head is
//    encrypted: the gate lets the connection through as soon as it sends
//    its first bytes, within the same deadline.)
//
// A connection let through is relayed byte for byte to the server on a
// thread of its own until either side closes. The server behind serves one
// request per connection, so a head is always read by the gate first.
//
// Thread-safe; Stop (or destruction) closes every connection and joins
// every thread.
#ifndef SMALLEM_SERVER_HTTP_CONNECTION_GATE_H_
#define SMALLEM_SERVER_HTTP_CONNECTION_GATE_H_

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace smallem {

struct ConnectionGateOptions {
  int max_per_peer = 32;
  absl::Duration head_deadline = absl::Seconds(10);
  int max_head_bytes = 16 << 10;
  bool tls = false;  // the head cannot be read: wait for first bytes only
};

class ConnectionGate {
 public:
  // Listens on host:port (port 0 picks one) and relays to 127.0.0.1:backend_port.
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Start(const std::string& host, int port,
                                                               int backend_port,
                                                               ConnectionGateOptions options);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  int port() const { return port_; }

  // Closes the listening socket and every connection; joins the threads.
  // Idempotent.
  void Stop();

 private:
  struct Waiting;
  ConnectionGate(int listen_fd, int port, int backend_port, ConnectionGateOptions options);

  void Poll();  // the poll thread: accepts, waits for heads, hands over
  void Relay(int client_fd, std::string peer, std::string head);
  // Counts one more connection from `peer`; false when it has max_per_peer.
  bool Admit(const std::string& peer);
  void Leave(const std::string& peer);

  const int listen_fd_;
  const int port_;
  const int backend_port_;
  const ConnectionGateOptions options_;
  int wake_pipe_[2] = {-1, -1};  // Stop writes to wake the poll thread

  absl::Mutex mu_;
  std::map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
  int relays_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, int> relay_fds_ ABSL_GUARDED_BY(mu_);  // client fd → server fd
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread poller_;
  bool stopped_ = false;
};

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_CONNECTION_GATE_H_
