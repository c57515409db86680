#include "server/http/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace smallem {
namespace {

// The address of a peer, without its port ("127.0.0.1", "::1").
std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text,
              sizeof text);
  }
  return text;
}

// Writes all of `data` to the blocking socket `fd`; false when it fails.
bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void SetBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); }

}  // namespace

// A connection in the gate, its head not yet whole.
struct ConnectionGate::Waiting {
  int fd;
  std::string peer;
  absl::Time deadline;
  std::string head;  // received so far, to pass on first
};

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Start(
    const std::string& host, int port, int backend_port, ConnectionGateOptions options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port));
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port = ntohs(bound.ss_family == AF_INET6
                                   ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                   : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  std::unique_ptr<ConnectionGate> gate(new ConnectionGate(fd, bound_port, backend_port, options));
  if (pipe2(gate->wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError("cannot make the dashboard gate's wake-up pipe");
  }
  gate->poller_ = std::thread([g = gate.get()] { g->Poll(); });
  return gate;
}

ConnectionGate::ConnectionGate(int listen_fd, int port, int backend_port,
                               ConnectionGateOptions options)
    : listen_fd_(listen_fd), port_(port), backend_port_(backend_port), options_(options) {}

ConnectionGate::~ConnectionGate() { Stop(); }

void ConnectionGate::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Relays end when their sockets do.
    for (const auto& [client, server] : relay_fds_) {
      shutdown(client, SHUT_RDWR);
      shutdown(server, SHUT_RDWR);
    }
  }
  if (wake_pipe_[1] >= 0) {
    const char byte = 0;
    (void)!write(wake_pipe_[1], &byte, 1);
  }
  if (poller_.joinable()) poller_.join();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* relays) { return *relays == 0; }, &relays_));
  }
  close(listen_fd_);
  for (int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

bool ConnectionGate::Admit(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  int& open = per_peer_[peer];
  if (open >= options_.max_per_peer) return false;
  ++open;
  return true;
}

void ConnectionGate::Leave(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
}

void ConnectionGate::Poll() {
  std::vector<Waiting> waiting;
  std::vector<char> buffer(static_cast<size_t>(options_.max_head_bytes));
  auto drop = [this](Waiting& w) {
    close(w.fd);
    Leave(w.peer);
  };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    absl::Time next = absl::InfiniteFuture();
    for (const Waiting& w : waiting) {
      fds.push_back({w.fd, POLLIN, 0});
      next = std::min(next, w.deadline);
    }
    int timeout_ms = -1;
    if (next != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(next - absl::Now()) + 1));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    const absl::Time now = absl::Now();
    std::vector<Waiting> still;
    for (size_t i = 0; i < waiting.size(); ++i) {
      Waiting& w = waiting[i];
      bool through = false, closed = false;
      if (fds[i + 2].revents != 0) {
        const size_t room = static_cast<size_t>(options_.max_head_bytes) - w.head.size();
        const ssize_t r = recv(w.fd, buffer.data(), std::max<size_t>(room, 1), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
          closed = true;
        } else if (r > 0) {
          w.head.append(buffer.data(), static_cast<size_t>(r));
          // Over TLS the first bytes are all the gate can see.
          through = options_.tls || w.head.find("\r\n\r\n") != std::string::npos;
          // A head larger than any the server reads is not waited for.
          if (!through && w.head.size() >= static_cast<size_t>(options_.max_head_bytes)) {
            closed = true;
          }
        }
      }
      if (!through && !closed && now >= w.deadline) closed = true;  // too slow
      if (closed) {
        drop(w);
      } else if (through) {
        absl::MutexLock lock(&mu_);
        ++relays_;
        std::thread([this, w = std::move(w)]() mutable {
          Relay(w.fd, std::move(w.peer), std::move(w.head));
        }).detach();
      } else {
        still.push_back(std::move(w));
      }
    }
    waiting = std::move(still);
    if (fds[0].revents & POLLIN) {
      while (true) {
        sockaddr_storage addr{};
        socklen_t length = sizeof addr;
        const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;  // none left (EAGAIN), or one that went away
        std::string peer = PeerAddress(addr);
        if (!Admit(peer)) {
          close(fd);  // this address has max_per_peer open already
          continue;
        }
        waiting.push_back(Waiting{fd, std::move(peer), now + options_.head_deadline, ""});
      }
    }
    if (fds[1].revents & POLLIN) {
      char drain[16];
      while (read(wake_pipe_[0], drain, sizeof drain) > 0) {
      }
    }
  }
  for (Waiting& w : waiting) drop(w);
}

void ConnectionGate::Relay(int client, std::string peer, std::string head) {
  SetBlocking(client);
  int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(backend_port_));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = server >= 0 && connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) ok = false;
    if (ok) relay_fds_[client] = server;
  }
  ok = ok && SendAll(server, head.data(), head.size());
  // Both ways until the server has answered and closed (it serves one
  // request per connection) or either side fails.
  std::vector<char> buffer(64 << 10);
  bool client_open = true;
  while (ok) {
    // A client that has closed its side is no longer polled (fd -1).
    pollfd fds[2] = {{server, POLLIN, 0}, {client_open ? client : -1, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) {
      const ssize_t r = recv(server, buffer.data(), buffer.size(), 0);
      if (r <= 0 || !SendAll(client, buffer.data(), static_cast<size_t>(r))) break;
    }
    if (client_open && fds[1].revents != 0) {
      const ssize_t r = recv(client, buffer.data(), buffer.size(), 0);
      if (r <= 0) {
        client_open = false;  // it sent all it will; the answer may still come
        shutdown(server, SHUT_WR);
      } else if (!SendAll(server, buffer.data(), static_cast<size_t>(r))) {
        break;
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    relay_fds_.erase(client);
  }
  if (server >= 0) close(server);
  close(client);
  Leave(peer);
  absl::MutexLock lock(&mu_);
  --relays_;
}

}  // namespace smallem
