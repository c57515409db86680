// The exit codes of every smallem binary (smallemctl and smallem-worker's
// child mode among them) and the one table from an absl::Status to a code,
// so a script and the worker daemon read the same meaning everywhere
// (docs/design-notes.md § Exit codes):
//
//   0  kExitOk        success
//   2  kExitBadInput  the input is at fault and running the same command
//                     again fails the same way: InvalidArgument (a flag, a
//                     spec, a grid, a dataset), NotFound (a file or name that
//                     does not exist), ResourceExhausted (a model too large
//                     for the device's memory, a full disk)
//   1  kExitError     any other error (the network, the system, a bug):
//                     running again may succeed
//
// A binary may choose a code itself where the status alone cannot say who
// is at fault (the worker's child exits 1 when its device cannot be opened,
// whatever the status: the device, not the run, is at fault).
#ifndef SMALLEM_BASE_EXIT_CODES_H_
#define SMALLEM_BASE_EXIT_CODES_H_

#include "absl/status/status.h"

namespace smallem {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitBadInput = 2;

// The exit code for `status`, per the table above.
int ExitCodeFor(const absl::Status& status);

// Prints "error: <status's message>" on stderr and returns
// ExitCodeFor(status): a command's way out, `return ReportError(status);`.
int ReportError(const absl::Status& status);

}  // namespace smallem

#endif  // SMALLEM_BASE_EXIT_CODES_H_
