#include "base/exit_codes.h"

#include "gtest/gtest.h"

namespace smallem {
namespace {

TEST(ExitCodesTest, SuccessIsZero) { EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0); }

TEST(ExitCodesTest, InputAtFaultIsTwo) {
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("bad flag")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("no such file")), 2);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("out of memory")), 2);
}

TEST(ExitCodesTest, EverythingElseIsOne) {
  for (const absl::Status& status :
       {absl::InternalError("x"), absl::CancelledError("x"), absl::UnavailableError("x"),
        absl::UnauthenticatedError("x"), absl::DataLossError("x"),
        absl::FailedPreconditionError("x"), absl::DeadlineExceededError("x"),
        absl::PermissionDeniedError("x")}) {
    EXPECT_EQ(ExitCodeFor(status), 1) << status;
  }
}

TEST(ExitCodesTest, ReportErrorPrintsTheMessageAndReturnsItsCode) {
  testing::internal::CaptureStderr();
  const int code = ReportError(absl::NotFoundError("grid.yaml: no such file"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: grid.yaml: no such file\n");
  EXPECT_EQ(code, kExitBadInput);
}

}  // namespace
}  // namespace smallem
