// The worker's child mode: `smallem-worker child --spec SPEC.json --out DIR`
// trains one run in its own process, so a crash fails the job, not the
// daemon.
//
// Protocol with the daemon:
//   stdout  one JSON object per line:
//           {"event":"progress","step":..,"total_steps":..,"loss":..,
//            "tokens_per_s":..,"elapsed_s":..,"eta_s":..}
//   DIR/result.json  the Result JSON (DESIGN.md § Formats), on success
//   exit    0 success; 2 a deterministic error (InvalidArgument or
//           ResourceExhausted: the spec, the dataset, out of memory — not
//           retried); 1 any other error (retried); killed by a signal:
//           crashed or cancelled
//   stderr  its last line is the error message
#ifndef SMALLEM_WORKER_CHILD_H_
#define SMALLEM_WORKER_CHILD_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/train/trainer.h"

namespace smallem {

inline constexpr int kChildExitOk = 0;
inline constexpr int kChildExitError = 1;
inline constexpr int kChildExitInvalid = 2;

struct ChildArgs {
  std::string spec_path;        // complete run spec JSON; "data" is a local directory
  std::string out_dir;          // result.json and weights go here
  int threads = 0;              // CPU backend threads; 0 = every hardware thread
  int64_t progress_every = 10;  // steps between progress lines
};

// One stdout line of the protocol, and back. ParseProgressLine returns
// nullopt for a line that is not a progress event (it is ignored).
std::string FormatProgressLine(const TrainProgress& progress);
std::optional<TrainProgress> ParseProgressLine(const std::string& line);

// The exit code for a Train status, per the protocol above.
int ChildExitCode(const absl::Status& status);

// Runs the child: trains, prints progress, writes the result. Returns the
// exit code; the error message, if any, is the last line written to stderr.
int RunChild(const ChildArgs& args);

}  // namespace smallem

#endif  // SMALLEM_WORKER_CHILD_H_
