// CPU/CUDA parity of a whole model with attention: latent (f32 matmuls and
// activations): the same weights give the same loss and the same gradient
// of every parameter, with and without a query latent. Head size 32 (a CUDA
// attention size), 16 rotary channels, a latent of 24, odd vocabulary and
// time. Skips without a GPU.
#include <cmath>
#include <cstdint>
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

namespace smallem {
namespace {

constexpr int64_t kBatch = 3, kTime = 37;

struct Pass {
  float loss = 0;
  std::vector<float> grads;
};

Pass ForwardBackward(Model& model, const std::vector<int32_t>& in,
                     const std::vector<int32_t>& tg) {
  Backend& be = model.backend();
  Arena arena(be, size_t{1} << 20);
  Tape tape(be, arena);
  tape.set_activation_dtype(DType::kF32);
  auto upload = [&](const std::vector<int32_t>& ids) {
    Tensor t = arena.Allocate({static_cast<int64_t>(ids.size())}, DType::kI32);
    be.CopyToDevice(t.data, ids.data(), t.bytes());
    return t;
  };
  model.ZeroGrad();
  const Var loss = Mean(tape, model.Losses(tape, upload(in), upload(tg), kBatch, kTime));
  tape.Backward(loss);
  Pass pass;
  be.CopyToHost(&pass.loss, tape.value(loss).data, sizeof(float));
  pass.grads.resize(static_cast<size_t>(model.ParameterCount()));
  be.CopyToHost(pass.grads.data(), model.grads().data, model.grads().bytes());
  return pass;
}

TEST(LatentModelParityTest, LossAndGradientsMatchTheCpu) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU, CUDA parity skipped: " << gpu.status();
  dynamic_cast<CudaBackend&>(**gpu).set_matmul_precision(MatmulPrecision::kF32);
  for (int64_t q_latent : {0, 20}) {
    Architecture arch = Architecture::Modern();
    arch.attention = AttentionKind::kLatent;
    arch.kv_latent = 24;
    arch.q_latent = q_latent;
    const ModelConfig config{.vocab = 67, .context = kTime, .layers = 2, .heads = 2,
                             .embed = 64, .architecture = arch};
    CpuBackend cpu(2);
    auto on_cpu = Model::Create(config, cpu);
    auto on_gpu = Model::Create(config, **gpu);
    ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());
    (*on_cpu)->Initialize(5);  // drawn on the host: identical on both
    (*on_gpu)->Initialize(5);
    Rng rng(9);
    std::vector<int32_t> in(kBatch * kTime), tg(kBatch * kTime);
    for (int32_t& id : in) id = static_cast<int32_t>(rng.Below(config.vocab));
    for (int32_t& id : tg) id = static_cast<int32_t>(rng.Below(config.vocab));
    const Pass want = ForwardBackward(**on_cpu, in, tg);
    const Pass got = ForwardBackward(**on_gpu, in, tg);
    EXPECT_NEAR(got.loss, want.loss, 1e-4 * std::abs(want.loss)) << "q_latent " << q_latent;
    for (const Model::Parameter& p : (*on_cpu)->parameters()) {
      const size_t begin = p.value.f32() - (*on_cpu)->values().f32();
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < p.value.numel(); ++i) {
        const double w = want.grads[begin + i], g = got.grads[begin + i];
        diff += (g - w) * (g - w);
        norm += w * w;
      }
      EXPECT_LE(std::sqrt(diff), 1e-3 * std::sqrt(norm) + 1e-7)
          << p.name << ", q_latent " << q_latent;
    }
  }
}

}  // namespace
}  // namespace smallem
