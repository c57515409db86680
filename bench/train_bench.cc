// Training throughput of the engine on the CPU backend: tokens per second of
// full training steps (forward, backward, AdamW) on random tokens. The peer
// is bench/torch_peer.py with the same model, batch and thread count;
// bench/compare_torch.sh runs both and prints the ratio.
//
//   smallem_train_bench --vocab 256 --threads 2 [--arch gpt2|modern --layers 4 --embed 128 --heads 4
//                        --context 128 --batch 16 --steps 30 --warmup 5]
#include <cstdio>
#include <string>

#include "bench/flags.h"
#include "bench/training_steps.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  using bench::StringFlag;
  const int threads = static_cast<int>(Flag(argc, argv, "--threads", 0));
  auto arch = Architecture::FromPreset(StringFlag(argc, argv, "--arch", "gpt2"));
  if (!arch.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arch.status().message()).c_str());
    return 2;
  }
  const ModelConfig config{.vocab = Flag(argc, argv, "--vocab", 256),
                           .context = Flag(argc, argv, "--context", 128),
                           .layers = Flag(argc, argv, "--layers", 4),
                           .heads = Flag(argc, argv, "--heads", 4),
                           .embed = Flag(argc, argv, "--embed", 128),
                           .architecture = *arch};
  const int64_t B = Flag(argc, argv, "--batch", 16), T = config.context;
  const int64_t steps = Flag(argc, argv, "--steps", 30), warmup = Flag(argc, argv, "--warmup", 5);

  CpuBackend be(threads);
  auto model = Model::Create(config, be);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 2;
  }
  (*model)->Initialize(1);
  auto opt = AdamWOptimizer::Create(**model, AdamWOptions{});
  const bench::StepTiming timing =
      bench::TimeTrainingSteps(**model, B, warmup, steps, [&] { (*opt)->Step(1e-3f); });
  const double seconds = timing.seconds;
  const double tokens_per_s = static_cast<double>(steps * B * T) / seconds;
  std::printf("{\"impl\":\"smallem\",\"blas_core\":\"%s\",\"arch\":\"%s\",\"vocab\":%lld,\"threads\":%d,\"params\":%lld,"
              "\"tokens_per_s\":%.1f,\"ms_per_step\":%.2f,\"loss\":%.4f}\n",
              CpuBackend::BlasCore().c_str(), StringFlag(argc, argv, "--arch", "gpt2").c_str(),
              static_cast<long long>(config.vocab), be.threads(),
              static_cast<long long>((*model)->ParameterCount()), tokens_per_s,
              1000.0 * seconds / steps, timing.last_loss);
  return 0;
}
