#include "base/subprocess.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/files.h"
#include "gtest/gtest.h"

namespace smallem {
namespace {

// Everything left to read on `fd`, up to its end of file.
std::string ReadToEnd(int fd) {
  std::string all;
  char buffer[1024];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) all.append(buffer, static_cast<size_t>(n));
  return all;
}

class SubprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "smallem_subprocess_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
};

TEST_F(SubprocessTest, PipesStdoutAndStderrApart) {
  absl::StatusOr<std::unique_ptr<Subprocess>> program = Subprocess::Start(
      {.argv = {"/bin/sh", "-c", "echo out; echo err >&2; echo $$ >&2; exit 4"},
       .stdout_to = OutputTo::kPipe,
       .stderr_to = OutputTo::kPipe});
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(ReadToEnd((*program)->stdout_fd()), "out\n");
  EXPECT_EQ(ReadToEnd((*program)->stderr_fd()),
            "err\n" + std::to_string((*program)->pid()) + "\n");
  const ProcessExit exit = (*program)->Wait();
  EXPECT_EQ(exit.exit_code, 4);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ((*program)->Wait().exit_code, 4);  // idempotent
}

TEST_F(SubprocessTest, OutputGoesToAFileAndStderrCanFollowStdout) {
  const std::string log = dir_ + "/log";
  for (const char* word : {"first", "second"}) {
    absl::StatusOr<std::unique_ptr<Subprocess>> program = Subprocess::Start(
        {.argv = {"sh", "-c", std::string("echo ") + word + "; echo " + word + "-err >&2"},
         .search_path = true,
         .stdout_to = OutputTo::kFile,
         .stdout_path = log,
         .stderr_to = OutputTo::kStdout});
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_EQ((*program)->stdout_fd(), -1);
    EXPECT_TRUE((*program)->Wait().ok());
  }
  EXPECT_EQ(ReadFile(log).value_or(""), "first\nfirst-err\nsecond\nsecond-err\n");
}

TEST_F(SubprocessTest, OutputFileInAMissingDirectoryIsNamed) {
  const std::string log = dir_ + "/missing/log";
  absl::StatusOr<std::unique_ptr<Subprocess>> program = Subprocess::Start(
      {.argv = {"/bin/true"}, .stdout_to = OutputTo::kFile, .stdout_path = log});
  EXPECT_EQ(program.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(program.status().message().find(log), std::string::npos) << program.status();
}

TEST_F(SubprocessTest, GivenEnvironmentReplacesTheParents) {
  absl::StatusOr<std::unique_ptr<Subprocess>> program =
      Subprocess::Start({.argv = {"/bin/sh", "-c", "echo \"$SMALLEM_X|$HOME\""},
                         .env = std::vector<std::string>{"SMALLEM_X=42"},
                         .stdout_to = OutputTo::kPipe});
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(ReadToEnd((*program)->stdout_fd()), "42|\n");
  EXPECT_TRUE((*program)->Wait().ok());
}

TEST_F(SubprocessTest, KillStopsAProgramThatWouldRunForever) {
  absl::StatusOr<std::unique_ptr<Subprocess>> program =
      Subprocess::Start({.argv = {"/bin/sleep", "1000"}, .own_process_group = true});
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(getpgid((*program)->pid()), (*program)->pid());
  (*program)->Kill();
  const ProcessExit exit = (*program)->Wait();
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_FALSE(exit.ok());
}

TEST_F(SubprocessTest, MissingProgramPathIsNotFound) {
  absl::StatusOr<std::unique_ptr<Subprocess>> program =
      Subprocess::Start({.argv = {dir_ + "/no-such-program"}});
  EXPECT_EQ(program.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(program.status().message().find("no-such-program"), std::string::npos);
}

TEST(RunProgramTest, CapturesOutputAndExitCode) {
  auto result = RunProgram({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_NE(result->output.find("out\n"), std::string::npos);
  EXPECT_NE(result->output.find("err\n"), std::string::npos);
}

TEST(RunProgramTest, RunsInTheGivenDirectory) {
  auto result = RunProgram({"pwd"}, "/");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->output, "/\n");
}

TEST(RunProgramTest, MissingProgramIsNotFound) {
  auto result = RunProgram({"smallem-no-such-program"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("smallem-no-such-program"), std::string::npos);
}

TEST(RunProgramTest, MissingDirectoryIsNotFound) {
  auto result = RunProgram({"pwd"}, "/nonexistent-dir");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace smallem
