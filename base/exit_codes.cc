#include "base/exit_codes.h"

#include <cstdio>
#include <string>

namespace smallem {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kResourceExhausted:
      return kExitBadInput;
    default:
      return kExitError;
  }
}

int ReportError(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

}  // namespace smallem
