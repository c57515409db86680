#include "worker/child_process.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/status_macros.h"

extern "C" char** environ;

namespace smallem {

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  return env;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::string& program, const std::vector<std::string>& args) {
  return SpawnWith(program, args, std::nullopt);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::string& program, const std::vector<std::string>& args,
    const std::vector<std::string>& env) {
  return SpawnWith(program, args, env);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::SpawnWith(
    const std::string& program, const std::vector<std::string>& args,
    std::optional<std::vector<std::string>> env) {
  SubprocessOptions options;
  options.argv.reserve(args.size() + 1);
  options.argv.push_back(program);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = std::move(env);
  options.stdout_to = OutputTo::kPipe;
  options.stderr_to = OutputTo::kPipe;
  options.own_process_group = true;
  options.die_with_parent = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> process, Subprocess::Start(options));
  return std::unique_ptr<ChildProcess>(new ChildProcess(std::move(process)));
}

void ChildProcess::Drain(std::string* buffer, bool is_stdout, std::vector<std::string>* lines,
                         bool eof) {
  size_t start = 0;
  while (true) {
    size_t nl = buffer->find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = buffer->substr(start, nl - start);
    start = nl + 1;
    if (is_stdout) {
      lines->push_back(std::move(line));
    } else if (!line.empty()) {
      KeepStderrLine(std::move(line));
    }
  }
  buffer->erase(0, start);
  if (eof && !buffer->empty()) {
    if (is_stdout) lines->push_back(*buffer);
    else KeepStderrLine(*buffer);
    buffer->clear();
  }
}

void ChildProcess::KeepStderrLine(std::string line) {
  last_stderr_line_ = line;
  stderr_tail_.push_back(std::move(line));
  if (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
}

bool ChildProcess::Poll(int timeout_ms, std::vector<std::string>* lines) {
  const int out_fd = process_->stdout_fd(), err_fd = process_->stderr_fd();
  if (out_fd < 0 && err_fd < 0) return false;
  pollfd fds[2];
  int n = 0;
  if (out_fd >= 0) fds[n++] = {.fd = out_fd, .events = POLLIN, .revents = 0};
  if (err_fd >= 0) fds[n++] = {.fd = err_fd, .events = POLLIN, .revents = 0};
  int ready = poll(fds, n, timeout_ms);
  if (ready <= 0) return true;  // timeout, or EINTR: poll again later
  for (int i = 0; i < n; ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const bool is_stdout = fds[i].fd == out_fd;
    std::string* buffer = is_stdout ? &out_buffer_ : &err_buffer_;
    char chunk[8192];
    ssize_t got = read(fds[i].fd, chunk, sizeof(chunk));
    if (got > 0) {
      buffer->append(chunk, got);
      Drain(buffer, is_stdout, lines, /*eof=*/false);
    } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
      Drain(buffer, is_stdout, lines, /*eof=*/true);
      if (is_stdout) process_->CloseStdout();
      else process_->CloseStderr();
    }
  }
  return process_->stdout_fd() >= 0 || process_->stderr_fd() >= 0;
}

ChildExit ChildProcess::Wait() {
  const ChildExit exit = process_->Wait();
  if (waited_) return exit;
  waited_ = true;
  // Read what is left in the pipes (the stderr message above all), but do
  // not wait on a grandchild that inherited them.
  std::vector<std::string> ignored;
  for (int i = 0; i < 50 && Poll(10, &ignored); ++i) {
  }
  process_->CloseStdout();
  process_->CloseStderr();
  return exit;
}

}  // namespace smallem
