#include "worker/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

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
  return SpawnWith(program, args, nullptr);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::string& program, const std::vector<std::string>& args,
    const std::vector<std::string>& env) {
  return SpawnWith(program, args, &env);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::SpawnWith(
    const std::string& program, const std::vector<std::string>& args,
    const std::vector<std::string>* env) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed (other threads may hold locks).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (env != nullptr) {
    for (const std::string& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the parent died before prctl
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    // Signals blocked by the daemon's signal thread stay blocked across exec.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (env != nullptr) execve(program.c_str(), argv.data(), envp.data());
    else execv(program.c_str(), argv.data());
    const char* reason = std::strerror(errno);
    (void)!write(STDERR_FILENO, "cannot execute ", 15);
    (void)!write(STDERR_FILENO, program.c_str(), program.size());
    (void)!write(STDERR_FILENO, ": ", 2);
    (void)!write(STDERR_FILENO, reason, std::strlen(reason));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out_pipe[0], err_pipe[0]));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    Kill();
    Wait();
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
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
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  pollfd fds[2];
  int n = 0;
  if (out_fd_ >= 0) fds[n++] = {.fd = out_fd_, .events = POLLIN, .revents = 0};
  if (err_fd_ >= 0) fds[n++] = {.fd = err_fd_, .events = POLLIN, .revents = 0};
  int ready = poll(fds, n, timeout_ms);
  if (ready <= 0) return true;  // timeout, or EINTR: poll again later
  for (int i = 0; i < n; ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const bool is_stdout = fds[i].fd == out_fd_;
    std::string* buffer = is_stdout ? &out_buffer_ : &err_buffer_;
    char chunk[8192];
    ssize_t got = read(fds[i].fd, chunk, sizeof(chunk));
    if (got > 0) {
      buffer->append(chunk, got);
      Drain(buffer, is_stdout, lines, /*eof=*/false);
    } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
      Drain(buffer, is_stdout, lines, /*eof=*/true);
      close(fds[i].fd);
      (is_stdout ? out_fd_ : err_fd_) = -1;
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

void ChildProcess::Kill() {
  if (!reaped_) kill(pid_, SIGKILL);
}

ChildExit ChildProcess::Wait() {
  if (reaped_) return exit_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  if (WIFEXITED(status)) exit_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit_.signal = WTERMSIG(status);
  // Read what is left in the pipes (the stderr message above all), but do
  // not wait on a grandchild that inherited them.
  std::vector<std::string> ignored;
  for (int i = 0; i < 50 && Poll(10, &ignored); ++i) {
  }
  for (int* fd : {&out_fd_, &err_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  return exit_;
}

}  // namespace smallem
