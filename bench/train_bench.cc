// Training throughput of the engine on the CPU backend: tokens per second of
// full training steps (forward, backward, AdamW) on random tokens. The peer
// is bench/torch_peer.py with the same model, batch and thread count;
// bench/compare_torch.sh runs both and prints the ratio.
//
//   smallem_train_bench --vocab 256 --threads 2 [--layers 4 --embed 128 --heads 4
//                        --context 128 --batch 16 --steps 30 --warmup 5 --arch gpt2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/optim/adamw.h"
#include "engine/random.h"

namespace {

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return fallback;
}

std::string StringFlag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace smallem;
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
  Arena arena(be);
  Tape tape(be, arena);
  Rng rng(1);
  std::vector<int32_t> in(B * T), tg(B * T);
  float loss_value = 0;
  std::chrono::steady_clock::time_point start;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    if (step == warmup) start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < B * T; ++i) {
      in[i] = static_cast<int32_t>(rng.Below(config.vocab));
      tg[i] = static_cast<int32_t>(rng.Below(config.vocab));
    }
    arena.Reset();
    tape.Reset();
    Tensor ti = arena.Allocate({B * T}, DType::kI32), tt = arena.Allocate({B * T}, DType::kI32);
    be.CopyToDevice(ti.data, in.data(), ti.bytes());
    be.CopyToDevice(tt.data, tg.data(), tt.bytes());
    (*model)->ZeroGrad();
    Var loss = Mean(tape, (*model)->Losses(tape, ti, tt, B, T));
    tape.Backward(loss);
    (*opt)->Step(1e-3f);
    be.CopyToHost(&loss_value, tape.value(loss).data, sizeof(float));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens_per_s = static_cast<double>(steps * B * T) / seconds;
  std::printf("{\"impl\":\"smallem\",\"vocab\":%lld,\"threads\":%d,\"params\":%lld,"
              "\"tokens_per_s\":%.1f,\"ms_per_step\":%.2f,\"loss\":%.4f}\n",
              static_cast<long long>(config.vocab), be.threads(),
              static_cast<long long>((*model)->ParameterCount()), tokens_per_s,
              1000.0 * seconds / steps, loss_value);
  return 0;
}
