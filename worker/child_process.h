// ChildProcess: one spawned program (base/subprocess.h) with its stdout read
// line by line and its stderr kept (the last line is the child's error
// message, by the worker's child protocol). The child gets its own process
// group (a Ctrl-C meant for the daemon does not reach it) and is killed by
// the kernel if the thread that spawned it dies (PR_SET_PDEATHSIG), so a
// kill -9 of the daemon leaves no orphan training.
//
// Not thread-safe: one owner thread polls, kills and waits.
#ifndef SMALLEM_WORKER_CHILD_PROCESS_H_
#define SMALLEM_WORKER_CHILD_PROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/subprocess.h"

namespace smallem {

// How a child ended: exit_code when it exited, signal when it was killed.
using ChildExit = ProcessExit;

class ChildProcess {
 public:
  // Starts `program` (a path) with `args` (argv[1..]). Subprocess::Start's
  // error when it cannot be started: NotFound naming a program that does
  // not exist.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::string& program,
                                                             const std::vector<std::string>& args);
  // The same with `env` ("NAME=value" entries) as the child's whole
  // environment instead of this process's.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::string& program,
                                                             const std::vector<std::string>& args,
                                                             const std::vector<std::string>& env);
  ~ChildProcess() = default;  // kills and reaps a child still running

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Waits up to timeout_ms for output and appends complete stdout lines to
  // `lines`. Returns false once the child has closed both pipes (it exited
  // or is exiting): call Wait next.
  bool Poll(int timeout_ms, std::vector<std::string>* lines);

  // Sends SIGKILL (no-op once reaped).
  void Kill() { process_->Kill(SIGKILL); }
  // Sends SIGTERM: the child stops training at the next step, writes a
  // checkpoint when it has a path, and exits (no-op once reaped).
  void Terminate() { process_->Kill(SIGTERM); }
  // Reaps the child (blocking), reads what is left of its output, and
  // returns how it ended; idempotent.
  ChildExit Wait();

  pid_t pid() const { return process_->pid(); }
  // The last non-empty line the child wrote to stderr ("" if none).
  const std::string& last_stderr_line() const { return last_stderr_line_; }
  // Its last kStderrTailLines non-empty stderr lines, oldest first.
  static constexpr size_t kStderrTailLines = 8;
  std::vector<std::string> stderr_tail() const {
    return std::vector<std::string>(stderr_tail_.begin(), stderr_tail_.end());
  }

 private:
  explicit ChildProcess(std::unique_ptr<Subprocess> process) : process_(std::move(process)) {}
  static absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnWith(
      const std::string& program, const std::vector<std::string>& args,
      std::optional<std::vector<std::string>> env);
  void KeepStderrLine(std::string line);
  // Splits buffered bytes into lines.
  void Drain(std::string* buffer, bool is_stdout, std::vector<std::string>* lines, bool eof);

  std::unique_ptr<Subprocess> process_;  // its stdout and stderr are pipes
  std::string out_buffer_;
  std::string err_buffer_;
  std::string last_stderr_line_;
  std::deque<std::string> stderr_tail_;  // at most kStderrTailLines
  bool waited_ = false;
};

// This process's environment ("NAME=value" entries), e.g. to derive a
// child's from.
std::vector<std::string> CurrentEnvironment();

}  // namespace smallem

#endif  // SMALLEM_WORKER_CHILD_PROCESS_H_
