// Training steps replayed from CUDA graphs (engine/train/trainer.cc,
// Backend::CaptureGraph): after kWarmupSteps eager steps the trainer
// captures one step — staged upload, gather, forward, backward, clipping,
// optimizer — and replays it with one launch per step.
//
//  * A replayed run equals the eager run of the same seed bit for bit, step
//    by step (AdamW and muon:short; learned positions, whose ids are a
//    model-owned device constant uploaded before capture, and RoPE), also when the host runs
//    ahead of the device (no read-back until the end), in the training
//    precision (bf16) too, and with `period=K`, which alternates two
//    captured variants.
//  * Two runs of one seed give the same losses bit for bit.
//  * No allocation (cudaMalloc, cudaHostAlloc) after the warm-up steps.
//  * The backend's capture itself: staged values are read at replay time,
//    CopyToDevice constants keep their capture-time bytes, and a host read
//    inside a capture dies with a message.
//  * Ops on bf16 activations (matmuls, attention) replay bit for bit in both
//    precisions once an eager run has sized their staging.
//
// Every test skips when no GPU is present.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/backend.h"
#include "engine/bf16.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"
#include "kernels/cuda_backend.h"
#include "runspec/run_spec.h"
#include "tests/engine/dataset_fixture.h"

namespace smallem {
namespace {

// On the emulated device (tests/CMakeLists.txt defines SMALLEM_EMULATED_DEVICE)
// every CUDA thread is a fiber under AddressSanitizer, ~2 s a step: fewer
// steps and validation batches keep the suite within its CI budget, with the
// same checks (still past the warm-up, still several replays).
#ifdef SMALLEM_EMULATED_DEVICE
constexpr int64_t kSteps = 6, kEvalBatches = 1, kBatch = 2, kLayers = 1;
#else
constexpr int64_t kSteps = 20, kEvalBatches = 3, kBatch = 5, kLayers = 2;
#endif

// Head size 32 (the smallest the CUDA attention has), odd elsewhere.
RunSpec TinySpec(const std::string& optimizer, const Architecture& arch, int64_t seed = 11) {
  RunSpec s = testing::TinyRunSpec(kSteps, kEvalBatches);
  s.embed = 64;
  s.batch = kBatch;
  s.layers = kLayers;
  s.warmup = 0.1;
  s.seed = seed;
  s.optimizer = optimizer;
  s.architecture = arch;
  return s;
}

struct TrainingRun {
  std::vector<float> losses;         // after each progress step
  std::vector<int64_t> allocations;  // CudaBackend::allocation_count() then
  std::vector<int> graphs;           // CudaBackend::graph_count() then
  float final_loss = 0;
  double val = 0;
  bool cuda_graphs = false;
};

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

uint64_t Bits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

class GraphTest : public ::testing::Test {
 protected:
  virtual MatmulPrecision precision() const { return MatmulPrecision::kF32; }

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0, precision());
    if (!gpu.ok()) GTEST_SKIP() << "no GPU, graph tests skipped: " << gpu.status();
    gpu_ = std::move(*gpu);
    cuda_ = dynamic_cast<CudaBackend*>(gpu_.get());
    ASSERT_NE(cuda_, nullptr);
  }

  void TearDown() override {
    for (void* ptr : owned_) gpu_->Free(ptr);
  }

  Tensor Alloc(Shape shape) {
    Tensor t{.shape = shape};
    absl::StatusOr<void*> data = gpu_->Allocate(t.bytes());
    CHECK(data.ok()) << data.status();
    t.data = *data;
    owned_.push_back(t.data);
    return t;
  }

  std::vector<float> Read(const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    gpu_->CopyToHost(host.data(), t.data, t.bytes());
    return host;
  }

  // Trains `spec` on a fresh CudaBackend (so that runs share no plan or
  // buffer), reading the loss every `progress_every` steps.
  TrainingRun TrainOnGpu(const RunSpec& spec, bool graphs, int64_t progress_every = 1) {
    absl::StatusOr<std::unique_ptr<Backend>> created = CreateCudaBackend(0, precision());
    CHECK(created.ok()) << created.status();
    auto& cuda = dynamic_cast<CudaBackend&>(**created);
    TrainingRun run;
    TrainOptions options;
    options.progress_every = progress_every;
    options.cuda_graphs = graphs;
    options.on_progress = [&](const TrainProgress& p) {
      run.losses.push_back(static_cast<float>(p.loss));
      run.allocations.push_back(cuda.allocation_count());
      run.graphs.push_back(cuda.graph_count());
    };
    absl::StatusOr<nlohmann::json> result = Train(spec, cuda, options);
    CHECK(result.ok()) << result.status();
    run.final_loss = (*result)["final_train_loss"].get<float>();
    run.val = (*result)["val_nats_per_byte"].get<double>();
    run.cuda_graphs = (*result)["cuda_graphs"].get<bool>();
    return run;
  }

  void ExpectReplayEqualsEager(const RunSpec& spec) {
    const std::string what = spec.ToJson().dump();
    const TrainingRun eager = TrainOnGpu(spec, /*graphs=*/false);
    const TrainingRun replayed = TrainOnGpu(spec, /*graphs=*/true);
    EXPECT_FALSE(eager.cuda_graphs) << what;
    EXPECT_TRUE(replayed.cuda_graphs) << what;
    ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps)) << what;
    // The loss moves, so equal losses are not equal constants.
    EXPECT_LT(eager.losses.back(), eager.losses.front() - 0.05f) << what;
    EXPECT_EQ(Bits(replayed.losses), Bits(eager.losses)) << what;
    EXPECT_EQ(Bits(replayed.val), Bits(eager.val)) << what;
  }

  std::unique_ptr<Backend> gpu_;
  CudaBackend* cuda_ = nullptr;
  std::vector<void*> owned_;
};

TEST_F(GraphTest, ReplayedStepsEqualEagerStepsBitForBit) {
  for (const char* optimizer : {"adamw", "muon:short"}) {
    for (const Architecture& arch : {Architecture::Gpt2(), Architecture::Modern()}) {
      ExpectReplayEqualsEager(TinySpec(optimizer, arch));
    }
  }
}

TEST_F(GraphTest, HostRunningAheadOfTheDeviceChangesNoBit) {
  // No read-back until the end: the host queues the replays as fast as it
  // can, rewriting the staging memory only once the previous step's upload
  // has read it (WaitStaged).
  for (const char* optimizer : {"adamw", "muon:short"}) {
    const RunSpec spec = TinySpec(optimizer, Architecture::Modern());
    const TrainingRun eager = TrainOnGpu(spec, false, /*progress_every=*/1000);
    const TrainingRun replayed = TrainOnGpu(spec, true, /*progress_every=*/1000);
    EXPECT_TRUE(replayed.cuda_graphs);
    EXPECT_EQ(Bits(replayed.final_loss), Bits(eager.final_loss)) << optimizer;
    EXPECT_EQ(Bits(replayed.val), Bits(eager.val)) << optimizer;
  }
}

TEST_F(GraphTest, PeriodicMuonReplaysOneGraphPerUpdateVariant) {
  // period=3: steps 1, 4, 7… orthogonalize, the others normalize rows —
  // two sequences of calls, so two graphs.
  const RunSpec spec = TinySpec("muon:short,period=3,norm", Architecture::Gpt2());
  ExpectReplayEqualsEager(spec);
  const TrainingRun replayed = TrainOnGpu(spec, true);
  EXPECT_EQ(replayed.graphs.back(), 2);
}

TEST_F(GraphTest, SameSeedGivesTheSameLossesBitForBit) {
  for (const char* optimizer : {"adamw", "muon:short"}) {
    const RunSpec spec = TinySpec(optimizer, Architecture::Gpt2());
    const TrainingRun first = TrainOnGpu(spec, true);
    const TrainingRun second = TrainOnGpu(spec, true);
    EXPECT_EQ(Bits(second.losses), Bits(first.losses)) << optimizer;
    EXPECT_EQ(Bits(second.val), Bits(first.val)) << optimizer;
    const TrainingRun other = TrainOnGpu(TinySpec(optimizer, Architecture::Gpt2(), /*seed=*/12), true);
    EXPECT_NE(Bits(other.losses), Bits(first.losses)) << "the seed must matter";
  }
}

TEST_F(GraphTest, NothingIsAllocatedAfterTheWarmUp) {
  for (const char* optimizer : {"adamw", "muon:short,period=2"}) {
    const TrainingRun run = TrainOnGpu(TinySpec(optimizer, Architecture::Gpt2()), true);
    ASSERT_EQ(run.allocations.size(), static_cast<size_t>(kSteps));
    // Entry s is read after step s + 1; step kWarmupSteps + 1 is the first
    // captured one. With period=2 the other variant is captured
    // one step later, from the same memory.
    const bool periodic = std::string(optimizer) != "adamw";
    for (size_t s = 0; s < run.graphs.size(); ++s) {
      const int want = s < kWarmupSteps ? 0 : (s == kWarmupSteps || !periodic ? 1 : 2);
      EXPECT_EQ(run.graphs[s], want) << optimizer << " after step " << s + 1;
    }
    for (size_t s = kWarmupSteps + 1; s < run.allocations.size(); ++s) {
      EXPECT_EQ(run.allocations[s], run.allocations[kWarmupSteps])
          << optimizer << ": allocations after step " << s + 1;
    }
  }
}

TEST_F(GraphTest, ReplaysReadStagedValuesAndKeepCapturedConstants) {
  const Tensor x = Alloc({4, 5}), out = Alloc({4, 5}), scale = Alloc({1}), constant = Alloc({5});
  gpu_->Fill(x, 1.0f);
  absl::StatusOr<void*> staging = gpu_->AllocateStaging(sizeof(float));
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto* staged = static_cast<float*>(*staging);
  std::vector<float> host = {1, 2, 3, 4, 5};
  const int64_t allocations = cuda_->allocation_count();
  absl::StatusOr<int> graph = gpu_->CaptureGraph([&] {
    gpu_->UploadStaged(scale.data, staged, sizeof(float));
    gpu_->CopyToDevice(constant.data, host.data(), host.size() * sizeof(float));
    gpu_->RowScale({.in = x, .out = out, .scale = scale, .alpha = 2.0f});
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  // The first recording found no page-locked memory for the constant and
  // was redone with a block of it.
  EXPECT_EQ(cuda_->allocation_count(), allocations + 1);
  // Capturing runs nothing.
  EXPECT_EQ(Read(out), std::vector<float>(20, 0.0f));
  EXPECT_EQ(Read(constant), std::vector<float>(5, 0.0f));
  host.assign(5, -7.0f);  // the graph kept its own copy
  for (float value : {3.0f, -0.5f}) {
    gpu_->WaitStaged();
    *staged = value;
    gpu_->LaunchGraph(*graph);
    EXPECT_EQ(Read(out), std::vector<float>(20, 2.0f * value));
    EXPECT_EQ(Read(constant), (std::vector<float>{1, 2, 3, 4, 5}));
  }
  EXPECT_EQ(cuda_->allocation_count(), allocations + 1);
  gpu_->ReleaseGraphs();
  EXPECT_EQ(cuda_->graph_count(), 0);
  gpu_->FreeStaging(*staging);
}

// A step's worth of bf16-stored activations: qkv = x·w, attention forward
// and backward, grad_x += grad_qkv·wᵀ (beta = 1 into a bf16 out, which kF32
// computes through f32 staging). The eager run sizes every buffer; the
// replay must then allocate nothing and give the same bytes.
TEST_F(GraphTest, Bf16StorageStepReplaysBitForBit) {
  const int64_t batch = 2, time = 37, heads = 2, head_dim = 64, c = heads * head_dim;
  const int64_t rows = batch * time;
  auto bf16_tensor = [&](Shape shape) {
    Tensor t = Alloc(Shape{shape.numel() / 2 + 1});  // ≥ the bf16 bytes
    return Tensor{t.data, shape, DType::kBF16};
  };
  auto upload = [&](const Tensor& t, float frequency) {
    std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = FloatToBf16(std::sin(frequency * static_cast<float>(i)));
    }
    gpu_->CopyToDevice(t.data, bits.data(), t.bytes());
  };
  auto bytes = [&](const Tensor& t) {
    std::vector<uint8_t> host(t.bytes());
    gpu_->CopyToHost(host.data(), t.data, t.bytes());
    return host;
  };
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    const Tensor x = bf16_tensor({rows, c}), w = bf16_tensor({c, 3 * c});
    const Tensor qkv = bf16_tensor({batch, time, 3 * c}), out = bf16_tensor({batch, time, c});
    const Tensor lse = Alloc({batch, heads, time}), g = bf16_tensor({batch, time, c});
    const Tensor g_qkv = bf16_tensor({batch, time, 3 * c}), g_x = bf16_tensor({rows, c});
    upload(x, 0.37f);
    upload(w, 0.11f);
    upload(g, 0.53f);
    const AttentionParams attention{.qkv = qkv, .out = out, .lse = lse, .batch = batch,
                                    .time = time, .heads = heads, .head_dim = head_dim};
    auto step = [&] {
      gpu_->Fill(g_qkv, 0.0f);
      gpu_->Fill(g_x, 0.25f);
      gpu_->Matmul({.a = x, .b = w, .out = qkv, .m = rows, .n = 3 * c, .k = c});
      gpu_->AttentionForward(attention);
      gpu_->AttentionBackward({.qkv = qkv, .out = out, .lse = lse, .grad_out = g,
                               .grad_qkv = g_qkv, .batch = batch, .time = time,
                               .heads = heads, .head_dim = head_dim});
      gpu_->Matmul({.a = g_qkv, .b = w, .out = g_x, .m = rows, .n = c, .k = 3 * c,
                    .trans_b = true, .beta = 1.0f});
    };
    step();
    const std::vector<std::vector<uint8_t>> eager = {bytes(out), bytes(lse), bytes(g_qkv),
                                                     bytes(g_x)};
    const int64_t allocations = cuda_->allocation_count();
    absl::StatusOr<int> graph = gpu_->CaptureGraph(step);
    ASSERT_TRUE(graph.ok()) << graph.status();
    for (const Tensor& t : {out, g_qkv, g_x}) gpu_->Fill(t, 0.0f);
    gpu_->LaunchGraph(*graph);
    const std::vector<std::vector<uint8_t>> replayed = {bytes(out), bytes(lse), bytes(g_qkv),
                                                        bytes(g_x)};
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_TRUE(replayed[i] == eager[i]) << "output " << i << " (out, lse, grad_qkv, grad_x)";
    }
    EXPECT_EQ(cuda_->allocation_count(), allocations);
    gpu_->ReleaseGraphs();
  }
}

TEST_F(GraphTest, AHostReadInsideACaptureDiesNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor t = Alloc({1});
  EXPECT_DEATH(
      {
        float value = 0;
        (void)gpu_->CaptureGraph([&] { gpu_->CopyToHost(&value, t.data, sizeof(float)); });
      },
      "CopyToHost inside a captured step");
}

// The training precision: bf16 matmuls and tensor-core attention.
class Bf16GraphTest : public GraphTest {
 protected:
  MatmulPrecision precision() const override { return kTrainingMatmulPrecision; }
};

TEST_F(Bf16GraphTest, TrainingPrecisionReplayEqualsEagerBitForBit) {
  for (const char* optimizer : {"adamw", "muon:short"}) {
    ExpectReplayEqualsEager(TinySpec(optimizer, Architecture::Gpt2()));
    ExpectReplayEqualsEager(TinySpec(optimizer, Architecture::Modern()));
  }
}

}  // namespace
}  // namespace smallem
