// The child protocol: `smallem-worker child` trains a tiny real config,
// prints progress lines, writes result.json and exits with the documented
// codes; ChildProcess reads it, kills it and reaps it.
#include "worker/child.h"

#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

// Runs `program args` to completion; returns its exit and stdout lines.
ChildExit RunToEnd(const std::string& program, const std::vector<std::string>& args,
                   std::vector<std::string>* lines, std::string* last_stderr = nullptr) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(program, args);
  EXPECT_TRUE(child.ok()) << child.status();
  while ((*child)->Poll(100, lines)) {
  }
  ChildExit exit = (*child)->Wait();
  if (last_stderr != nullptr) *last_stderr = (*child)->last_stderr_line();
  return exit;
}

TEST(ChildProcessTest, ReadsStdoutLinesAndKeepsTheLastStderrLine) {
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd("/bin/sh", {"-c", "echo one; echo first >&2; printf two; "
                                              "echo last >&2; exit 3"},
                            &lines, &err);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(err, "last");
}

TEST(ChildProcessTest, KillStopsAChildThatWouldRunForever) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn("/bin/sleep", {"1000"});
  ASSERT_TRUE(child.ok());
  std::vector<std::string> lines;
  EXPECT_TRUE((*child)->Poll(50, &lines));
  (*child)->Kill();
  ChildExit exit = (*child)->Wait();
  EXPECT_EQ(exit.signal, 9);
  EXPECT_FALSE(exit.ok());
}

TEST(ChildProcessTest, MissingProgramExitsWith127AndSaysWhy) {
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd("/nonexistent/smallem", {}, &lines, &err);
  EXPECT_EQ(exit.exit_code, 127);
  EXPECT_NE(err.find("/nonexistent/smallem"), std::string::npos) << err;
}

TEST(ChildProtocolTest, ProgressLineRoundTrips) {
  TrainProgress p{.step = 7, .total_steps = 20, .loss = 3.5, .tokens_per_s = 1000,
                  .elapsed_s = 1.5, .eta_s = 2.5};
  std::optional<TrainProgress> back = ParseProgressLine(FormatProgressLine(p));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->total_steps, 20);
  EXPECT_DOUBLE_EQ(back->loss, 3.5);
  EXPECT_DOUBLE_EQ(back->eta_s, 2.5);
  EXPECT_FALSE(ParseProgressLine("hello").has_value());
  EXPECT_FALSE(ParseProgressLine(R"({"event":"other"})").has_value());
}

TEST(ChildProtocolTest, DeterministicErrorsExitWith2) {
  EXPECT_EQ(ChildExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ChildExitCode(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ChildExitCode(absl::ResourceExhaustedError("x")), 2);
  EXPECT_EQ(ChildExitCode(absl::InternalError("x")), 1);
  EXPECT_EQ(ChildExitCode(absl::CancelledError("x")), 1);
}

class ChildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    data_ = dir_.Join("data");
    absl::Status prepared = testing::PrepareTinyDataset(dir_.path(), data_);
    ASSERT_TRUE(prepared.ok()) << prepared;
  }
  TempDir dir_;
  std::string data_;
};

TEST_F(ChildTest, TrainsATinyConfigPrintsProgressAndWritesTheResult) {
  const std::string spec = dir_.Join("spec.json");
  testing::WriteFile(spec, testing::TinySpecJson(data_, 20));
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd(testing::WorkerBinary(),
                            {"child", "--spec", spec, "--out", dir_.Join("out"),
                             "--progress-every", "5", "--threads", "1"},
                            &lines, &err);
  ASSERT_TRUE(exit.ok()) << "exit " << exit.exit_code << " signal " << exit.signal << ": " << err;
  std::vector<int64_t> steps;
  for (const std::string& line : lines) {
    if (std::optional<TrainProgress> p = ParseProgressLine(line)) {
      steps.push_back(p->step);
      EXPECT_EQ(p->total_steps, 20);
      EXPECT_GT(p->loss, 0);
    }
  }
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back(), 20);
  std::ifstream in(dir_.Join("out/result.json"));
  nlohmann::json result = nlohmann::json::parse(in);
  EXPECT_EQ(result["steps"], 20);
  EXPECT_GT(result["val_nats_per_byte"].get<double>(), 0);
  EXPECT_FALSE(result["device_class"].get<std::string>().empty());
}

TEST_F(ChildTest, InvalidSpecExitsWith2AndNamesTheProblem) {
  const std::string spec = dir_.Join("spec.json");
  nlohmann::json j = nlohmann::json::parse(testing::TinySpecJson(data_));
  j["heads"] = 3;  // 32 is not divisible by 3
  testing::WriteFile(spec, j.dump());
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd(testing::WorkerBinary(),
                            {"child", "--spec", spec, "--out", dir_.Join("out")}, &lines, &err);
  EXPECT_EQ(exit.exit_code, kChildExitInvalid) << err;
  EXPECT_NE(err.find("heads"), std::string::npos) << err;
}

TEST_F(ChildTest, MissingDatasetIsADeterministicError) {
  const std::string spec = dir_.Join("spec.json");
  testing::WriteFile(spec, testing::TinySpecJson(dir_.Join("nowhere")));
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd(testing::WorkerBinary(),
                            {"child", "--spec", spec, "--out", dir_.Join("out")}, &lines, &err);
  EXPECT_EQ(exit.exit_code, kChildExitInvalid) << err;
}

}  // namespace
}  // namespace smallem
