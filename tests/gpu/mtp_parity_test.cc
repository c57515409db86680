// CPU/CUDA parity of multi-token prediction (engine/model/mtp.h): the same
// weights of a two-depth model give the same training objective, the same
// per-depth losses and the same gradient of every parameter on CpuBackend
// and on CudaBackend, with f32 matmuls (f32 rounding) and in the speed mode
// (bf16 activations and matmuls: bf16 tolerance). MTP adds no op: this
// checks that the ops it composes (an embedding gather over the f32 stream,
// f32 merge products, masked means) behave on the GPU as on the CPU. Every
// test skips when no GPU is present.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/random.h"
#include "gtest/gtest.h"
#include "kernels/cuda_backend.h"
#include "tests/engine/architectures.h"

namespace smallem {
namespace {

constexpr int64_t kBatch = 3, kTime = 37;

ModelConfig MtpConfig(const Architecture& arch) {
  return ModelConfig{.vocab = 67, .context = kTime, .layers = 2, .heads = 2, .embed = 64,
                     .architecture = arch, .mtp = 2, .mtp_weight = 0.3};
}

// One forward and backward pass of the training objective, on the host.
struct Pass {
  float total = 0;
  std::vector<std::vector<float>> depths;  // per-row losses of each depth
  std::vector<float> grads;
};

Pass ObjectivePass(Backend& backend, const ModelConfig& config) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, backend);
  EXPECT_TRUE(model.ok()) << model.status();
  // The same weights on every backend: N(0, 0.1²), gains around 1.
  Rng rng(20240611);
  std::vector<float> weights(static_cast<size_t>((*model)->ParameterCount()));
  for (const Model::Parameter& p : (*model)->parameters()) {
    float* dst = weights.data() + (p.value.f32() - (*model)->values().f32());
    const double mean = p.name.ends_with(".gain") ? 1.0 : 0.0;
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      dst[i] = static_cast<float>(mean + 0.1 * rng.Normal());
    }
  }
  backend.CopyToDevice((*model)->values().data, weights.data(), (*model)->values().bytes());
  Rng data(5);
  std::vector<int32_t> inputs(kBatch * kTime), targets(kBatch * kTime);
  for (int32_t& id : inputs) id = static_cast<int32_t>(data.Below(config.vocab));
  for (int32_t& id : targets) id = static_cast<int32_t>(data.Below(config.vocab));

  Arena arena(backend, size_t{1} << 20);
  Tape tape(backend, arena);
  auto upload = [&](const std::vector<int32_t>& ids) {
    Tensor t = arena.Allocate({static_cast<int64_t>(ids.size())}, DType::kI32);
    backend.CopyToDevice(t.data, ids.data(), t.bytes());
    return t;
  };
  const Tensor in = upload(inputs), tg = upload(targets);
  Pass pass;
  {
    // The depths' per-row losses, without gradients.
    tape.set_grad_enabled(false);
    const Model::DepthLosses all = (*model)->AllLosses(tape, in, tg, kBatch, kTime);
    for (Var d : all.depths) {
      std::vector<float> rows(static_cast<size_t>(kBatch * kTime));
      backend.CopyToHost(rows.data(), tape.value(d).data, rows.size() * sizeof(float));
      pass.depths.push_back(rows);
    }
    tape.Reset();
    tape.set_grad_enabled(true);
  }
  (*model)->ZeroGrad();
  const Model::TrainingLoss loss = (*model)->TrainingObjective(tape, in, tg, kBatch, kTime);
  tape.Backward(loss.total);
  backend.CopyToHost(&pass.total, tape.value(loss.total).data, sizeof(float));
  pass.grads.resize(static_cast<size_t>((*model)->ParameterCount()));
  backend.CopyToHost(pass.grads.data(), (*model)->grads().data, (*model)->grads().bytes());
  return pass;
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

void ExpectClose(const Pass& gpu, const Pass& cpu, double tolerance, const std::string& what) {
  EXPECT_LE(std::fabs(static_cast<double>(gpu.total) - cpu.total), tolerance * cpu.total)
      << what << ": objective, cpu " << cpu.total << ", cuda " << gpu.total;
  ASSERT_EQ(gpu.depths.size(), cpu.depths.size());
  for (size_t d = 0; d < cpu.depths.size(); ++d) {
    EXPECT_LE(RelativeError(gpu.depths[d], cpu.depths[d]), tolerance)
        << what << ": depth " << d + 1 << "'s losses";
  }
  EXPECT_LE(RelativeError(gpu.grads, cpu.grads), tolerance) << what << ": ‖Δ grad‖/‖grad‖";
}

class MtpParityTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(MtpParityTest, ObjectiveDepthsAndGradientsMatchTheCpu) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0, MatmulPrecision::kF32);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU, CUDA MTP parity skipped: " << gpu.status();
  CpuBackend cpu(0);
  const ModelConfig config = MtpConfig(GetParam());
  ExpectClose(ObjectivePass(**gpu, config), ObjectivePass(cpu, config), 1e-4, "f32 matmuls");
}

INSTANTIATE_TEST_SUITE_P(EveryOption, MtpParityTest,
                         ::testing::ValuesIn(testing::AllArchitectures()), testing::ArchName);

// Named Bf16… so that scripts/gpu-check runs it in its bf16 process.
class Bf16MtpParityTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(Bf16MtpParityTest, Bf16ModeStaysCloseToTheCpu) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0, MatmulPrecision::kBf16);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU, CUDA MTP parity skipped: " << gpu.status();
  CpuBackend cpu(0);
  const ModelConfig config = MtpConfig(GetParam());
  ExpectClose(ObjectivePass(**gpu, config), ObjectivePass(cpu, config), 5e-2, "bf16 speed mode");
}

INSTANTIATE_TEST_SUITE_P(Presets, Bf16MtpParityTest,
                         ::testing::Values(Architecture::Gpt2(), Architecture::Modern()),
                         testing::ArchName);

}  // namespace
}  // namespace smallem
