#include "base/exit_codes.h"

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

}  // namespace smallem
