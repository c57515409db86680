#include "base/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace smallem {

absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const std::string& cwd) {
  CHECK(!argv.empty());
  int output_pipe[2];
  // The child reports a failed chdir/exec (its errno) through this pipe;
  // close-on-exec makes a successful exec close it empty.
  int error_pipe[2];
  if (pipe(output_pipe) != 0 || pipe2(error_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    close(output_pipe[0]);
    close(error_pipe[0]);
    dup2(output_pipe[1], STDOUT_FILENO);
    dup2(output_pipe[1], STDERR_FILENO);
    close(output_pipe[1]);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    int failure[2] = {0, 0};  // {stage: 1 chdir, 2 exec; errno}
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      failure[0] = 1;
    } else {
      execvp(args[0], args.data());
      failure[0] = 2;
    }
    failure[1] = errno;
    ssize_t ignored = write(error_pipe[1], failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  }
  close(output_pipe[1]);
  close(error_pipe[1]);
  ProgramResult result;
  char buffer[4096];
  for (;;) {
    ssize_t n = read(output_pipe[0], buffer, sizeof(buffer));
    if (n > 0) {
      result.output.append(buffer, n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(output_pipe[0]);
  int failure[2] = {0, 0};
  ssize_t got;
  do {
    got = read(error_pipe[0], failure, sizeof(failure));
  } while (got < 0 && errno == EINTR);
  close(error_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof(failure))) {
    if (failure[0] == 1) {
      return absl::NotFoundError(
          absl::StrCat("cannot enter directory ", cwd, ": ", std::strerror(failure[1])));
    }
    if (failure[1] == ENOENT) {
      return absl::NotFoundError(absl::StrCat("program not found: ", argv[0]));
    }
    return absl::InternalError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(failure[1])));
  }
  result.exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : -1;
  return result;
}

}  // namespace smallem
