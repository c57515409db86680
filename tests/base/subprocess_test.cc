#include "base/subprocess.h"

#include <string>

#include "gtest/gtest.h"

namespace smallem {
namespace {

TEST(SubprocessTest, CapturesOutputAndExitCode) {
  auto result = RunProgram({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_NE(result->output.find("out\n"), std::string::npos);
  EXPECT_NE(result->output.find("err\n"), std::string::npos);
}

TEST(SubprocessTest, RunsInTheGivenDirectory) {
  auto result = RunProgram({"pwd"}, "/");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->output, "/\n");
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  auto result = RunProgram({"smallem-no-such-program"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("smallem-no-such-program"), std::string::npos);
}

TEST(SubprocessTest, MissingDirectoryIsNotFound) {
  auto result = RunProgram({"pwd"}, "/nonexistent-dir");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace smallem
