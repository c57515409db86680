// The child protocol: `smallem-worker child` trains a tiny real config,
// prints progress lines, writes result.json and exits with the documented
// codes; ChildProcess reads it, kills it and reaps it.
#include "worker/child.h"

#include <signal.h>

#include <fstream>

#include "base/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"
#include "worker/devices.h"

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

TEST(ChildProcessTest, MissingProgramIsNotFoundAndNamed) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn("/nonexistent/smallem", {});
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(child.status().message().find("/nonexistent/smallem"), std::string::npos)
      << child.status();
}

TEST(ChildProcessTest, KeepsTheTailOfStderr) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(
      "/bin/sh", {"-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i >&2; done; echo >&2"});
  ASSERT_TRUE(child.ok());
  std::vector<std::string> lines;
  while ((*child)->Poll(100, &lines)) {
  }
  (*child)->Wait();
  std::vector<std::string> tail = (*child)->stderr_tail();
  ASSERT_EQ(tail.size(), ChildProcess::kStderrTailLines);
  EXPECT_EQ(tail.front(), "line3");
  EXPECT_EQ(tail.back(), "line10");
  EXPECT_EQ((*child)->last_stderr_line(), "line10");
}

TEST(ChildProcessTest, GivenEnvironmentReplacesTheParents) {
  std::vector<std::string> lines;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(
      "/bin/sh", {"-c", "echo \"$SMALLEM_X|$HOME\""}, {"SMALLEM_X=42"});
  ASSERT_TRUE(child.ok());
  while ((*child)->Poll(100, &lines)) {
  }
  EXPECT_TRUE((*child)->Wait().ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"42|"}));
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

TEST(ChildProtocolTest, DenseProgressLineCarriesNoRouting) {
  const std::string line = FormatProgressLine(TrainProgress{.step = 3, .total_steps = 9});
  EXPECT_EQ(line.find("max_over_mean_load"), std::string::npos) << line;
  EXPECT_EQ(line.find("tokens_per_expert"), std::string::npos) << line;
  std::optional<TrainProgress> back = ParseProgressLine(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->max_over_mean_load, 0.0);
  EXPECT_TRUE(back->tokens_per_expert.empty());
}

TEST(ChildProtocolTest, MoeProgressLineRoundTripsItsRouting) {
  TrainProgress p{.step = 10, .total_steps = 20, .loss = 3.1, .max_over_mean_load = 1.25,
                  .tokens_per_expert = {96, 160, 128, 128}};
  std::optional<TrainProgress> back = ParseProgressLine(FormatProgressLine(p));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 10);
  EXPECT_DOUBLE_EQ(back->max_over_mean_load, 1.25);
  EXPECT_EQ(back->tokens_per_expert, (std::vector<double>{96, 160, 128, 128}));
  // A list with anything but numbers is dropped whole; the rest still parses.
  back = ParseProgressLine(
      R"({"event":"progress","step":4,"max_over_mean_load":1.5,"tokens_per_expert":[1,"x"]})");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 4);
  EXPECT_DOUBLE_EQ(back->max_over_mean_load, 1.5);
  EXPECT_TRUE(back->tokens_per_expert.empty());
}

// The entries of `env` named `name` ("NAME=value").
std::vector<std::string> Entries(const std::vector<std::string>& env, const std::string& name) {
  std::vector<std::string> found;
  for (const std::string& e : env) {
    if (e.rfind(name + "=", 0) == 0) found.push_back(e);
  }
  return found;
}

ChildArgs JobArgs(const std::string& device) {
  return ChildArgs{.spec_path = "/cache/jobs/run-1-attempt-1/spec.json",
                   .out_dir = "/cache/jobs/run-1-attempt-1",
                   .threads = 4,
                   .progress_every = 10,
                   .device = device};
}

TEST(ChildCommandTest, CpuChildGetsTheParentsEnvironment) {
  const std::vector<std::string> parent = {"PATH=/usr/bin", "HOME=/home/w",
                                           "CUDA_VISIBLE_DEVICES=2,3"};
  absl::StatusOr<ChildCommand> command = BuildChildCommand(JobArgs("cpu"), parent);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->args,
            (std::vector<std::string>{"child", "--spec", "/cache/jobs/run-1-attempt-1/spec.json",
                                      "--out", "/cache/jobs/run-1-attempt-1", "--threads", "4",
                                      "--progress-every", "10", "--device", "cpu"}));
  EXPECT_EQ(command->env, parent);
}

TEST(ChildCommandTest, CudaChildSeesOnlyItsGpuAndTrainsOnCuda0) {
  const std::vector<std::string> parent = {"PATH=/usr/bin", "HOME=/home/w"};
  absl::StatusOr<ChildCommand> command = BuildChildCommand(JobArgs("cuda:1"), parent);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->args.back(), "cuda:0");
  EXPECT_EQ(command->args[command->args.size() - 2], "--device");
  EXPECT_EQ(Entries(command->env, "CUDA_VISIBLE_DEVICES"),
            (std::vector<std::string>{"CUDA_VISIBLE_DEVICES=1"}));
  EXPECT_EQ(Entries(command->env, "PATH"), (std::vector<std::string>{"PATH=/usr/bin"}));
  EXPECT_EQ(Entries(command->env, "HOME"), (std::vector<std::string>{"HOME=/home/w"}));
  EXPECT_EQ(command->env.size(), 3u);
}

TEST(ChildCommandTest, CudaChildPicksItsGpuFromTheWorkersVisibleDevices) {
  // A worker started with CUDA_VISIBLE_DEVICES=GPU-5e1f,3 calls them cuda:0
  // and cuda:1 (list-devices ran with that environment).
  const std::vector<std::string> parent = {"CUDA_VISIBLE_DEVICES=GPU-5e1f, 3", "PATH=/usr/bin"};
  absl::StatusOr<ChildCommand> first = BuildChildCommand(JobArgs("cuda:0"), parent);
  absl::StatusOr<ChildCommand> second = BuildChildCommand(JobArgs("cuda:1"), parent);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(Entries(first->env, "CUDA_VISIBLE_DEVICES"),
            (std::vector<std::string>{"CUDA_VISIBLE_DEVICES=GPU-5e1f"}));
  EXPECT_EQ(Entries(second->env, "CUDA_VISIBLE_DEVICES"),
            (std::vector<std::string>{"CUDA_VISIBLE_DEVICES=3"}));
  EXPECT_EQ(second->args.back(), "cuda:0");

  absl::StatusOr<ChildCommand> beyond = BuildChildCommand(JobArgs("cuda:2"), parent);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(beyond.status().message().find("CUDA_VISIBLE_DEVICES=GPU-5e1f, 3"),
            absl::string_view::npos)
      << beyond.status();
}

TEST(ChildCommandTest, UnknownDeviceIsRefused) {
  EXPECT_EQ(BuildChildCommand(JobArgs("gpu0"), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChildFailureTest, ExitCodesAreTheChildsOwnJudgement) {
  const ChildExit invalid{.exit_code = 2};
  const ChildExit error{.exit_code = 1};
  EXPECT_EQ(ClassifyChildFailure(invalid, {"heads must divide embed"}),
            v1::FAILURE_CLASS_INVALID_CONFIG);
  EXPECT_EQ(ChildFailureMessage(invalid, {"noise", "heads must divide embed"}),
            "heads must divide embed");
  // Exit 1 is retried even when the message mentions memory (e.g. another
  // process held the GPU when the backend was created).
  EXPECT_EQ(ClassifyChildFailure(error, {"cuBLASLt: out of memory"}),
            v1::FAILURE_CLASS_ENGINE_ERROR);
  EXPECT_EQ(ChildFailureMessage(ChildExit{.exit_code = 127}, {}),
            "the child exited with code 127");
}

TEST(ChildFailureTest, CrashOutOfMemoryIsNotRetried) {
  const ChildExit aborted{.exit_code = -1, .signal = SIGABRT};
  const std::vector<std::string> tail = {
      "engine/arena.cc:26: CHECK failed: data.ok() activation memory: cuda:0: out of device "
      "memory allocating 8589934592 bytes (1024 held by this backend, 0 of 150000000000 free on "
      "the device; out of memory); use a smaller batch or model"};
  EXPECT_EQ(ClassifyChildFailure(aborted, tail), v1::FAILURE_CLASS_INVALID_CONFIG);
  const std::string message = ChildFailureMessage(aborted, tail);
  EXPECT_EQ(message.rfind("the child was killed by signal 6 (Aborted): engine/arena.cc:26", 0),
            0u)
      << message;
  EXPECT_EQ(ClassifyChildFailure(aborted, {"terminate called after throwing an instance of "
                                           "'std::bad_alloc'",
                                           "  what():  std::bad_alloc"}),
            v1::FAILURE_CLASS_INVALID_CONFIG);
}

TEST(ChildFailureTest, StickyCudaErrorIsAnEngineErrorWithItsTail) {
  const ChildExit aborted{.exit_code = -1, .signal = SIGABRT};
  const std::vector<std::string> tail = {
      "warning: something earlier",
      "kernels/cuda_backend.cc:190: CHECK failed: error == cudaSuccess Free (a queued op "
      "failed): cudaErrorIllegalAddress (an illegal memory access was encountered)"};
  EXPECT_EQ(ClassifyChildFailure(aborted, tail), v1::FAILURE_CLASS_ENGINE_ERROR);
  EXPECT_EQ(ChildFailureMessage(aborted, tail),
            "the child was killed by signal 6 (Aborted): warning: something earlier | "
            "kernels/cuda_backend.cc:190: CHECK failed: error == cudaSuccess Free (a queued op "
            "failed): cudaErrorIllegalAddress (an illegal memory access was encountered)");
  EXPECT_EQ(ClassifyChildFailure(ChildExit{.exit_code = -1, .signal = SIGSEGV}, {}),
            v1::FAILURE_CLASS_ENGINE_ERROR);
}

TEST(ChildFailureTest, LongMessagesKeepTheirEnd) {
  const std::string message =
      ChildFailureMessage(ChildExit{.exit_code = -1, .signal = SIGABRT},
                          {std::string(10'000, 'x') + "THE END"});
  EXPECT_EQ(message.size(), kMaxChildFailureMessageBytes);
  EXPECT_EQ(message.substr(message.size() - 7), "THE END");
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
  EXPECT_EQ(exit.exit_code, kExitBadInput) << err;
  EXPECT_NE(err.find("heads"), std::string::npos) << err;
}

TEST_F(ChildTest, MissingDatasetIsADeterministicError) {
  const std::string spec = dir_.Join("spec.json");
  testing::WriteFile(spec, testing::TinySpecJson(dir_.Join("nowhere")));
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd(testing::WorkerBinary(),
                            {"child", "--spec", spec, "--out", dir_.Join("out")}, &lines, &err);
  EXPECT_EQ(exit.exit_code, kExitBadInput) << err;
}

TEST_F(ChildTest, CudaDeviceTrainsOnTheGpuOrFailsSayingWhy) {
  const std::string spec = dir_.Join("spec.json");
  testing::WriteFile(spec, testing::TinySpecJson(data_, 20));
  std::vector<std::string> lines;
  std::string err;
  ChildExit exit = RunToEnd(testing::WorkerBinary(),
                            {"child", "--spec", spec, "--out", dir_.Join("out"), "--device",
                             "cuda:0", "--progress-every", "5"},
                            &lines, &err);
  absl::StatusOr<std::vector<DeviceInfo>> gpus = ListCudaDevices(testing::WorkerBinary());
  if (!gpus.ok()) {
    // No GPU here (or no CUDA in the build): the worker's device is at
    // fault, not the run, so the failure is retried (exit 1) and says why.
    EXPECT_EQ(exit.exit_code, kExitError) << err;
    EXPECT_EQ(err.rfind("cuda:0", 0), 0u) << err;
    if (!WorkerBuiltWithCuda()) EXPECT_NE(err.find("built without CUDA"), std::string::npos);
    return;
  }
  // A GPU machine: the result names the GPU's model as its device class.
  ASSERT_TRUE(exit.ok()) << "exit " << exit.exit_code << " signal " << exit.signal << ": " << err;
  std::ifstream in(dir_.Join("out/result.json"));
  nlohmann::json result = nlohmann::json::parse(in);
  EXPECT_EQ(result["steps"], 20);
  EXPECT_EQ(result["device_class"], (*gpus)[0].device_class);
}

}  // namespace
}  // namespace smallem
