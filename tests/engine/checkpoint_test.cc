// Checkpoints: the file format (round trip, damage, versions) and resuming a
// run from one, which must end with the weights and result of the
// uninterrupted run bit for bit (CPU, same thread count).
#include "engine/train/checkpoint.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <limits>

#include "base/files.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/resume.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/dataset_fixture.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test name, removed when the test binary exits.
std::string TempDir(const std::string& name) {
  static const struct Root {
    fs::path path = fs::temp_directory_path() /
                    ("smallem-checkpoint-" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } root;
  const fs::path p = root.path / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

Checkpoint SmallCheckpoint() {
  Checkpoint c;
  c.spec_json = R"({"lr":0.003})";
  c.dataset_hash = "abc";
  c.device_class = "cpu-2t-test";
  c.steps = 12;
  c.train_seconds = 1.0 / 3.0;
  c.last_loss = 4.25f;
  c.resumes = 2;
  c.optimizer_steps = 12;
  c.data.rng = Rng::State{.s = {1, 2, std::numeric_limits<uint64_t>::max(), 4},
                          .has_spare = true, .spare = -0.5};
  c.data.order = {96, 0, 32, 64};
  c.data.cursor = 3;
  c.data.consumed = 51;
  c.tensors = {{.name = "param.embed.weight", .values = {1.5f, -2.0f, 1e-30f}},
               {.name = "optim.adamw.m", .values = {}}};
  return c;
}

TEST(CheckpointFileTest, RoundTripKeepsEveryField) {
  const std::string path = TempDir("round") + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, SmallCheckpoint()).ok());
  absl::StatusOr<Checkpoint> back = ReadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status();
  const Checkpoint want = SmallCheckpoint();
  EXPECT_EQ(back->spec_json, want.spec_json);
  EXPECT_EQ(back->dataset_hash, want.dataset_hash);
  EXPECT_EQ(back->device_class, want.device_class);
  EXPECT_EQ(back->steps, 12);
  EXPECT_EQ(back->train_seconds, want.train_seconds);  // exactly: JSON keeps 17 digits
  EXPECT_EQ(back->last_loss, 4.25f);
  EXPECT_EQ(back->resumes, 2);
  EXPECT_EQ(back->optimizer_steps, 12);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back->data.rng.s[i], want.data.rng.s[i]);
  EXPECT_TRUE(back->data.rng.has_spare);
  EXPECT_EQ(back->data.rng.spare, -0.5);
  EXPECT_EQ(back->data.order, want.data.order);
  EXPECT_EQ(back->data.cursor, 3);
  EXPECT_EQ(back->data.consumed, 51);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[0].name, "param.embed.weight");
  EXPECT_EQ(back->tensors[0].values, want.tensors[0].values);
  EXPECT_TRUE(back->tensors[1].values.empty());
}

TEST(CheckpointFileTest, DamagedOrTruncatedFileIsDataLoss) {
  const std::string dir = TempDir("damaged");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, SmallCheckpoint()).ok());
  std::string bytes = *ReadFile(path);
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x01;
  ASSERT_TRUE(WriteFileDurably(dir + "/flipped", flipped).ok());
  absl::Status status = ReadCheckpoint(dir + "/flipped").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("SHA-256"), std::string::npos) << status;

  ASSERT_TRUE(WriteFileDurably(dir + "/short", bytes.substr(0, bytes.size() - 7)).ok());
  EXPECT_EQ(ReadCheckpoint(dir + "/short").status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(WriteFileDurably(dir + "/text", "not a checkpoint at all, just some text").ok());
  EXPECT_EQ(ReadCheckpoint(dir + "/text").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCheckpoint(dir + "/absent").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointFileTest, UnknownVersionSaysWhichBuildReadsIt) {
  const std::string dir = TempDir("version");
  ASSERT_TRUE(WriteCheckpoint(dir + "/ckpt", SmallCheckpoint()).ok());
  std::string bytes = *ReadFile(dir + "/ckpt");
  bytes[8] = 9;  // the version's low byte; the hash is not reached
  ASSERT_TRUE(WriteFileDurably(dir + "/v9", bytes).ok());
  absl::Status status = ReadCheckpoint(dir + "/v9").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("version 9"), std::string::npos) << status;
}

// Trains `spec` to the end in `out`, or (with `stop_at` > 0) until its
// first checkpoint at step `stop_at`, where it stops.
absl::StatusOr<nlohmann::json> TrainTo(const RunSpec& spec, const std::string& out,
                                       int64_t stop_at, const std::string& checkpoint,
                                       const std::string& resume_from) {
  CpuBackend backend(TestCpuOptions(2));
  std::atomic<bool> stop{false};
  TrainOptions options{.out_dir = out, .stop = &stop};
  options.checkpoint_path = checkpoint;
  options.checkpoint_every_steps = stop_at;
  options.on_checkpoint = [&](const CheckpointWritten& w) {
    EXPECT_EQ(w.steps, stop_at);
    stop = true;
  };
  options.resume_from = resume_from;
  return Train(spec, backend, options);
}

void ExpectResumeEqualsUninterrupted(const RunSpec& spec, const std::string& name) {
  const std::string dir = TempDir(name);
  absl::StatusOr<nlohmann::json> clean = TrainTo(spec, dir + "/clean", 0, "", "");
  ASSERT_TRUE(clean.ok()) << clean.status();

  const std::string checkpoint = dir + "/state.ckpt";
  absl::StatusOr<nlohmann::json> stopped = TrainTo(spec, dir + "/first", 11, checkpoint, "");
  ASSERT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
  absl::StatusOr<Checkpoint> saved = ReadCheckpoint(checkpoint);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->steps, 11);
  EXPECT_GT(saved->train_seconds, 0);

  // A new backend, model and optimizer: as in a new process.
  absl::StatusOr<nlohmann::json> resumed = TrainTo(spec, dir + "/resumed", 0, "", checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)["resumes"], 1);
  EXPECT_EQ((*clean)["resumes"], 0);
  EXPECT_GE((*resumed)["train_seconds"].get<double>(), saved->train_seconds);
  EXPECT_EQ(DeterministicResult(*resumed).dump(), DeterministicResult(*clean).dump());
  EXPECT_EQ(*ReadFile(dir + "/resumed/weights.safetensors"),
            *ReadFile(dir + "/clean/weights.safetensors"));
}

TEST(ResumeTest, AdamWRunResumedFromACheckpointEqualsTheUninterruptedRun) {
  ExpectResumeEqualsUninterrupted(testing::TinyRunSpec(/*steps=*/25, /*eval_batches=*/2), "adamw");
}

TEST(ResumeTest, MuonRunWithNorMuonAndAPeriodResumesBitForBit) {
  RunSpec spec = testing::TinyRunSpec(/*steps=*/25, /*eval_batches=*/2);
  spec.optimizer = "muon,period=3,norm";  // momenta, NorMuon statistics, period phase
  ExpectResumeEqualsUninterrupted(spec, "muon");
}

TEST(ResumeTest, MtpRunResumesBitForBit) {
  // The depths' weights and optimizer state are in the checkpoint too.
  RunSpec spec = testing::TinyRunSpec(/*steps=*/25, /*eval_batches=*/2);
  spec.mtp = 2;
  ExpectResumeEqualsUninterrupted(spec, "mtp");
}

TEST(ResumeTest, CheckpointOfAnotherSpecIsRefusedAsAResumeFailure) {
  const std::string dir = TempDir("other");
  const RunSpec spec = testing::TinyRunSpec(/*steps=*/25);
  ASSERT_EQ(TrainTo(spec, "", 5, dir + "/state.ckpt", "").status().code(),
            absl::StatusCode::kCancelled);
  RunSpec other = spec;
  other.lr = 1e-3;
  absl::Status status = TrainTo(other, "", 0, "", dir + "/state.ckpt").status();
  EXPECT_TRUE(IsResumeFailure(status)) << status;
  EXPECT_NE(status.message().find("another run spec"), std::string::npos) << status;
}

TEST(ResumeTest, NoCheckpointIsWrittenAfterTheLastStep) {
  const std::string dir = TempDir("last");
  int written = 0;
  CpuBackend backend(TestCpuOptions(2));
  TrainOptions options;
  options.checkpoint_path = dir + "/state.ckpt";
  options.checkpoint_every_steps = 5;
  options.on_checkpoint = [&](const CheckpointWritten&) { ++written; };
  ASSERT_TRUE(Train(testing::TinyRunSpec(/*steps=*/10, /*eval_batches=*/2), backend, options).ok());
  EXPECT_EQ(written, 1);  // at step 5; step 10 ends the run
  EXPECT_EQ(ReadCheckpoint(dir + "/state.ckpt")->steps, 5);
}

TEST(RunSpecTest, CheckpointMinutesIsValidatedAndOnlyInTheJsonWhenNotTheDefault) {
  RunSpec spec = testing::TinyRunSpec(10);
  EXPECT_FALSE(spec.ToJson().contains("checkpoint_minutes"));
  spec.checkpoint_minutes = 0.02;
  EXPECT_EQ(spec.ToJson()["checkpoint_minutes"], 0.02);
  EXPECT_EQ(RunSpec::FromJson(spec.ToJson())->checkpoint_minutes, 0.02);
  spec.checkpoint_minutes = -1;
  EXPECT_NE(spec.Validate().message().find("\"checkpoint_minutes\""), std::string::npos);
}

}  // namespace
}  // namespace smallem
