#include "base/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace smallem {
namespace {

// Descriptors opened for a start, closed in this process when it returns
// (the child has its copies).
class Descriptors {
 public:
  Descriptors() = default;
  ~Descriptors() {
    for (int fd : fds_) close(fd);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  int Add(int fd) {
    fds_.push_back(fd);
    return fd;
  }
  // Hands `fd` to the caller: it is no longer closed here.
  int Release(int fd) {
    std::erase(fds_, fd);
    return fd;
  }

 private:
  std::vector<int> fds_;
};

// Why a child could not run the program, sent to the parent through a
// close-on-exec pipe: a successful exec closes it empty.
struct StartFailure {
  enum Stage : int { kNone = 0, kChdir = 1, kExec = 2 } stage = kNone;
  int error = 0;
};

// Opens the target of an output stream in this process: the descriptor the
// child dup2s onto 1 or 2 (−1 for kInherit and kStdout); for kPipe also the
// read end, in *read_end.
absl::StatusOr<int> OpenOutput(OutputTo to, const std::string& path, const char* stream,
                               int null_fd, Descriptors& fds, int* read_end) {
  switch (to) {
    case OutputTo::kInherit:
    case OutputTo::kStdout:
      return -1;
    case OutputTo::kNull:
      return null_fd;
    case OutputTo::kFile: {
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) {
        return absl::ErrnoToStatus(
            errno, absl::StrCat("cannot open ", path, " for the program's ", stream));
      }
      return fds.Add(fd);
    }
    case OutputTo::kPipe: {
      int ends[2];
      if (pipe2(ends, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
      *read_end = fds.Add(ends[0]);
      return fds.Add(ends[1]);
    }
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const SubprocessOptions& options) {
  CHECK(!options.argv.empty()) << "Subprocess::Start: no program";
  CHECK(options.stdout_to != OutputTo::kStdout) << "Subprocess::Start: stdout into stdout";
  Descriptors fds;
  int null_fd = -1;
  if (options.stdin_null || options.stdout_to == OutputTo::kNull ||
      options.stderr_to == OutputTo::kNull) {
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) return absl::ErrnoToStatus(errno, "cannot open /dev/null");
    fds.Add(null_fd);
  }
  int stdout_read = -1, stderr_read = -1;
  ASSIGN_OR_RETURN(const int stdout_write, OpenOutput(options.stdout_to, options.stdout_path,
                                                     "stdout", null_fd, fds, &stdout_read));
  ASSIGN_OR_RETURN(const int stderr_write, OpenOutput(options.stderr_to, options.stderr_path,
                                                     "stderr", null_fd, fds, &stderr_read));
  int failure_pipe[2];
  if (pipe2(failure_pipe, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  const int failure_read = fds.Add(failure_pipe[0]);
  fds.Add(failure_pipe[1]);

  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed (other threads may hold locks).
  std::vector<char*> argv;
  for (const std::string& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env.has_value()) {
    for (const std::string& entry : *options.env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
  }
  const char* program = argv[0];
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  const int stdin_fd = options.stdin_null ? null_fd : -1;
  const bool stderr_to_stdout = options.stderr_to == OutputTo::kStdout;
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    if (options.own_process_group) setpgid(0, 0);
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);  // the parent died before prctl
    }
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    if (stdout_write >= 0) dup2(stdout_write, STDOUT_FILENO);
    if (stderr_to_stdout) dup2(STDOUT_FILENO, STDERR_FILENO);
    else if (stderr_write >= 0) dup2(stderr_write, STDERR_FILENO);
    // Signals blocked in this process (a daemon's signal thread blocks
    // some) would stay blocked across exec.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    StartFailure failure;
    if (cwd != nullptr && chdir(cwd) != 0) {
      failure.stage = StartFailure::kChdir;
    } else {
      if (options.env.has_value()) {
        if (options.search_path) execvpe(program, argv.data(), envp.data());
        else execve(program, argv.data(), envp.data());
      } else {
        if (options.search_path) execvp(program, argv.data());
        else execv(program, argv.data());
      }
      failure.stage = StartFailure::kExec;
    }
    failure.error = errno;
    (void)!write(failure_pipe[1], &failure, sizeof(failure));
    _exit(127);
  }

  // The parent keeps the pipes' read ends; the rest closes with `fds`.
  close(fds.Release(failure_pipe[1]));
  StartFailure failure;
  ssize_t got;
  do {
    got = read(failure_read, &failure, sizeof(failure));
  } while (got < 0 && errno == EINTR);
  auto subprocess = std::unique_ptr<Subprocess>(
      new Subprocess(pid, stdout_read >= 0 ? fds.Release(stdout_read) : -1,
                     stderr_read >= 0 ? fds.Release(stderr_read) : -1));
  if (got != static_cast<ssize_t>(sizeof(failure))) return subprocess;

  subprocess->Wait();
  if (failure.stage == StartFailure::kChdir) {
    return absl::ErrnoToStatus(failure.error,
                               absl::StrCat("cannot enter directory ", options.cwd));
  }
  if (failure.error == ENOENT) {
    return absl::NotFoundError(absl::StrCat("program not found: ", options.argv[0]));
  }
  return absl::ErrnoToStatus(failure.error, absl::StrCat("cannot run ", options.argv[0]));
}

Subprocess::~Subprocess() {
  if (!reaped_) {
    Kill(SIGKILL);
    Wait();
  }
  CloseStdout();
  CloseStderr();
}

void Subprocess::CloseStdout() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
}

void Subprocess::CloseStderr() {
  if (stderr_fd_ >= 0) close(stderr_fd_);
  stderr_fd_ = -1;
}

void Subprocess::Kill(int signal) {
  if (!reaped_) kill(pid_, signal);
}

ProcessExit Subprocess::Wait() {
  while (!Reap(/*block=*/true)) {
  }
  return exit_;
}

std::optional<ProcessExit> Subprocess::Poll() {
  if (!Reap(/*block=*/false)) return std::nullopt;
  return exit_;
}

bool Subprocess::Reap(bool block) {
  if (reaped_) return true;
  int status = 0;
  pid_t got = 0;
  do {
    got = waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got != pid_) return false;
  reaped_ = true;
  if (WIFEXITED(status)) exit_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit_.signal = WTERMSIG(status);
  return true;
}

absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const std::string& cwd) {
  SubprocessOptions options;
  options.argv = argv;
  options.search_path = true;
  options.cwd = cwd;
  options.stdin_null = true;
  options.stdout_to = OutputTo::kPipe;
  options.stderr_to = OutputTo::kStdout;
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> program, Subprocess::Start(options));
  ProgramResult result;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(program->stdout_fd(), buffer, sizeof(buffer));
    if (n > 0) {
      result.output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  program->CloseStdout();
  const ProcessExit exit = program->Wait();
  result.exit_code = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  return result;
}

}  // namespace smallem
