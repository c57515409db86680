// The worker's child mode: `smallem-worker child --spec SPEC.json --out DIR
// [--device cpu|cuda:N]` trains one run in its own process, so a crash or a
// sticky CUDA error fails the job, not the daemon.
//
// Protocol with the daemon:
//   argv    BuildChildCommand; a CUDA job's child sees one GPU only
//           (CUDA_VISIBLE_DEVICES) and trains on cuda:0
//   stdout  one JSON event per line (engine/train/progress_events.h):
//           progress every --progress-every steps, and checkpoint after
//           each checkpoint written to --checkpoint PATH (every
//           checkpoint_minutes of the spec; engine/train/checkpoint.h)
//   --resume PATH  continue from that checkpoint; when it cannot be used
//           (damaged, another run's or device class's) the child says so on
//           stderr and trains from the start instead
//   DIR/result.json  a RunResult's JSON (runspec/run_result.h), on success;
//           for a run that diverged, a DivergedResult's ({"diverged": true,
//           "diverged_step", "last_finite_loss", ...}), still with exit 0:
//           divergence is an outcome, never a crash
//   exit    ExitCodeFor the status (base/exit_codes.h): 0 success; 2 a
//           deterministic error (the spec, the dataset, out of memory — not
//           retried); 1 any other error (retried), and always 1 when the
//           device cannot be opened; kExitTerminated when a SIGTERM
//           stopped it (a scheduler or service manager stopping the whole
//           worker: the daemon releases the run, charging nothing); killed
//           by a signal: crashed (a CHECK, a sticky CUDA error) or cancelled
//   stderr  its last line is the error message; after a crash its tail
//           says what happened (ClassifyChildFailure reads it)
#ifndef SMALLEM_WORKER_CHILD_H_
#define SMALLEM_WORKER_CHILD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/train/progress_events.h"  // the stdout lines
#include "engine/train/trainer.h"
#include "smallem/v1/common.pb.h"
#include "worker/child_process.h"

namespace smallem {

struct ChildArgs {
  std::string spec_path;        // complete run spec JSON; "data" is a local directory
  std::string out_dir;          // result.json and weights go here
  int threads = 0;              // CPU backend threads; 0 = every hardware thread
  int64_t progress_every = 10;  // steps between progress lines
  std::string device = "cpu";   // "cpu" or "cuda:N", N among the GPUs this process sees
  std::string checkpoint_path;  // where checkpoints are written; "" = none
  std::string resume_path;      // a checkpoint to continue from; "" = none
};

// Runs the child: trains, prints progress, writes the result. Returns the
// exit code; the error message, if any, is the last line written to stderr.
int RunChild(const ChildArgs& args);

// The child's exit code after a SIGTERM stopped its training: 128 + SIGTERM,
// as a shell reports a process the signal ended. The daemon kills its
// children with SIGKILL, so a SIGTERM comes from whoever stops the worker.
inline constexpr int kExitTerminated = 128 + 15;

// How the daemon starts a child: its argv[1..] and its whole environment
// ("NAME=value" entries).
struct ChildCommand {
  std::vector<std::string> args;
  std::vector<std::string> env;
};

// The command for `args`, whose device is the daemon's name for it.
//  * "cpu": `child ... --device cpu`, the parent's environment unchanged.
//  * "cuda:N": `child ... --device cuda:0` with CUDA_VISIBLE_DEVICES set to
//    that one GPU: entry N of the parent's CUDA_VISIBLE_DEVICES when it has
//    one (the daemon's ordinals count only those), else N. The child's CUDA
//    state then touches no other GPU.
// InvalidArgument for another device name, or an N beyond the entries of
// the parent's CUDA_VISIBLE_DEVICES. Pure: reads nothing but its arguments.
absl::StatusOr<ChildCommand> BuildChildCommand(const ChildArgs& args,
                                               const std::vector<std::string>& parent_env);

// True when `text` reads as running out of memory (the CUDA backend's
// "out of device memory", cudaErrorMemoryAllocation, cuBLAS's
// CUBLAS_STATUS_ALLOC_FAILED, std::bad_alloc).
bool IsOutOfMemoryMessage(const std::string& text);

// How a child that did not succeed is reported. `stderr_tail` is its last
// stderr lines, oldest first (ChildProcess::stderr_tail).
//  * Class: INVALID_CONFIG (not retried) for exit code 2 (kExitBadInput), or
//    a crash whose tail reads as out of memory (the engine aborts when an
//    activation allocation fails on the GPU); ENGINE_ERROR (retried)
//    otherwise — an exit code other than 2, a sticky CUDA error, any other
//    crash.
//  * Message: for an exit code, the last stderr line (the protocol's error
//    message) or "the child exited with code N"; for a signal, "the child
//    was killed by signal 6 (Aborted): " and the tail, joined by " | ".
//    At most kMaxChildFailureMessageBytes, its end kept.
inline constexpr size_t kMaxChildFailureMessageBytes = 4000;
v1::FailureClass ClassifyChildFailure(const ChildExit& exit,
                                      const std::vector<std::string>& stderr_tail);
std::string ChildFailureMessage(const ChildExit& exit,
                                const std::vector<std::string>& stderr_tail);

}  // namespace smallem

#endif  // SMALLEM_WORKER_CHILD_H_
