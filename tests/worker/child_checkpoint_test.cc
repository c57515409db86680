// A training child killed with SIGKILL mid-run resumes from its last
// checkpoint and ends with bit for bit the weights and result of an
// uninterrupted child (CPU, one thread each): the child protocol's
// --checkpoint and --resume, with real processes.
#include <signal.h>

#include <filesystem>

#include "base/files.h"
#include "engine/train/resume.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

class ChildCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    data_ = dir_.Join("data");
    absl::Status prepared = testing::PrepareTinyDataset(dir_.path(), data_);
    ASSERT_TRUE(prepared.ok()) << prepared;
    // Long enough that the kill lands mid-run; a checkpoint every 0.12 s
    // of training.
    nlohmann::json spec = nlohmann::json::parse(testing::TinySpecJson(data_, 1000));
    spec["checkpoint_minutes"] = 0.002;
    spec_ = dir_.Join("spec.json");
    testing::WriteFile(spec_, spec.dump());
  }

  std::unique_ptr<ChildProcess> Spawn(const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"child", "--spec", spec_, "--out", out, "--threads", "1",
                                     "--progress-every", "100"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> child =
        ChildProcess::Spawn(testing::WorkerBinary(), args);
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  // Runs a child to its end; its result.json.
  nlohmann::json RunToEnd(const std::string& out, std::vector<std::string> extra) {
    std::unique_ptr<ChildProcess> child = Spawn(out, std::move(extra));
    if (child == nullptr) return nullptr;
    std::vector<std::string> lines;
    while (child->Poll(100, &lines)) {
    }
    const ChildExit exit = child->Wait();
    EXPECT_TRUE(exit.ok()) << "exit " << exit.exit_code << " signal " << exit.signal << ": "
                           << child->last_stderr_line();
    absl::StatusOr<std::string> text = ReadFile(out + "/result.json");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }

  TempDir dir_;
  std::string data_;
  std::string spec_;
};

TEST_F(ChildCheckpointTest, ChildKilledMidRunResumesToTheUninterruptedResult) {
  const std::string checkpoint = dir_.Join("state.ckpt");
  std::unique_ptr<ChildProcess> first = Spawn(dir_.Join("first"), {"--checkpoint", checkpoint});
  ASSERT_NE(first, nullptr);
  std::optional<CheckpointWritten> written;
  std::vector<std::string> lines;
  bool running = true;
  while (running && !written) {
    lines.clear();
    running = first->Poll(50, &lines);
    for (const std::string& line : lines) {
      if (!written) written = ParseCheckpointLine(line);
    }
  }
  ASSERT_TRUE(written.has_value()) << "the child never wrote a checkpoint";
  first->Kill();  // SIGKILL: no chance to clean up or finish a write
  const ChildExit killed = first->Wait();
  ASSERT_EQ(killed.signal, SIGKILL) << "the child ended before the kill (exit "
                                    << killed.exit_code << "); lengthen the run";
  EXPECT_EQ(written->path, checkpoint);
  EXPECT_GT(written->steps, 0);
  EXPECT_LT(written->steps, 1000);
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("first/result.json")));

  const nlohmann::json resumed = RunToEnd(dir_.Join("resumed"), {"--resume", checkpoint});
  const nlohmann::json clean = RunToEnd(dir_.Join("clean"), {});
  ASSERT_TRUE(resumed.is_object() && clean.is_object());
  EXPECT_EQ(resumed["resumes"], 1);
  EXPECT_EQ(clean["resumes"], 0);
  EXPECT_EQ(resumed["steps"], 1000);
  // Training time continues from the checkpoint's.
  EXPECT_GE(resumed["train_seconds"].get<double>(), written->train_seconds);
  EXPECT_EQ(DeterministicResult(resumed).dump(), DeterministicResult(clean).dump());
  EXPECT_EQ(*ReadFile(dir_.Join("resumed/weights.safetensors")),
            *ReadFile(dir_.Join("clean/weights.safetensors")));
}

TEST_F(ChildCheckpointTest, DamagedCheckpointIsReportedAndTheRunStartsAfresh) {
  testing::WriteFile(dir_.Join("bad.ckpt"), "SMLMCKPT but nothing after it");
  nlohmann::json spec = nlohmann::json::parse(testing::TinySpecJson(data_, 20));
  testing::WriteFile(spec_, spec.dump());
  std::unique_ptr<ChildProcess> child =
      Spawn(dir_.Join("out"), {"--resume", dir_.Join("bad.ckpt")});
  ASSERT_NE(child, nullptr);
  std::vector<std::string> lines;
  while (child->Poll(100, &lines)) {
  }
  ASSERT_TRUE(child->Wait().ok()) << child->last_stderr_line();
  bool said = false;
  for (const std::string& line : child->stderr_tail()) {
    said |= line.find("resume from") != std::string::npos &&
            line.find("training from the start") != std::string::npos;
  }
  EXPECT_TRUE(said) << "the child did not say why it started afresh";
  const nlohmann::json result = nlohmann::json::parse(*ReadFile(dir_.Join("out/result.json")));
  EXPECT_EQ(result["resumes"], 0);
  EXPECT_EQ(result["steps"], 20);
}

TEST(ChildProtocolTest, CheckpointLineRoundTrips) {
  const std::string line = FormatCheckpointLine(
      CheckpointWritten{.path = "/jobs/run-1/checkpoint.ckpt", .steps = 40, .train_seconds = 1.5});
  std::optional<CheckpointWritten> back = ParseCheckpointLine(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->path, "/jobs/run-1/checkpoint.ckpt");
  EXPECT_EQ(back->steps, 40);
  EXPECT_EQ(back->train_seconds, 1.5);
  EXPECT_FALSE(ParseCheckpointLine(R"({"event":"progress","step":3})").has_value());
  EXPECT_FALSE(ParseCheckpointLine(R"({"event":"checkpoint","path":7})").has_value());
  EXPECT_FALSE(ParseProgressLine(line).has_value());
}

}  // namespace
}  // namespace smallem
