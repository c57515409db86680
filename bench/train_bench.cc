// Training throughput of the engine on the CPU backend: tokens per second of
// full training steps (forward, backward, AdamW) on random tokens. The peer
// is bench/torch_peer.py with the same model, batch and thread count;
// bench/compare_torch.sh runs both and prints the ratio.
//
//   smallem_train_bench --vocab 256 --threads 2 [--arch gpt2|modern --layers 4 --embed 128 --heads 4
//                        --context 128 --batch 16 --steps 30 --warmup 5]
//                       [--mtp D --rounds 3]
//
// With --mtp D a second line follows the usual one: the step of the same
// model with D multi-token-prediction depths (engine/model/mtp.h) against
// the plain step, timed in `rounds` alternating rounds of `steps` steps.
// The result is the median of the rounds' own ratios (each pairs two
// adjacent timings, which share the machine's load of the moment); the
// ratio of the two best rounds is printed beside it (docs/benchmarks.md
// § Multi-token prediction).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cpu_bench.h"
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

  CpuBackend be(bench::CpuOptions(threads));
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
  std::printf("{\"impl\":\"smallem\",\"gemm\":\"%s\",\"blas_core\":\"%s\",\"arch\":\"%s\",\"vocab\":%lld,\"threads\":%d,\"params\":%lld,"
              "\"tokens_per_s\":%.1f,\"ms_per_step\":%.2f,\"loss\":%.4f}\n",
              be.GemmLibrary().c_str(), CpuBackend::BlasCore().c_str(), StringFlag(argc, argv, "--arch", "gpt2").c_str(),
              static_cast<long long>(config.vocab), be.threads(),
              static_cast<long long>((*model)->ParameterCount()), tokens_per_s,
              1000.0 * seconds / steps, timing.last_loss);
  const int64_t mtp = Flag(argc, argv, "--mtp", 0);
  if (mtp > 0) {
    ModelConfig with_mtp = config;
    with_mtp.mtp = mtp;
    auto mtp_model = Model::Create(with_mtp, be);
    if (!mtp_model.ok()) {
      std::fprintf(stderr, "--mtp %lld: %s\n", static_cast<long long>(mtp),
                   std::string(mtp_model.status().message()).c_str());
      return 2;
    }
    (*mtp_model)->Initialize(1);
    auto mtp_opt = AdamWOptimizer::Create(**mtp_model, AdamWOptions{});
    const int64_t rounds = std::max<int64_t>(1, Flag(argc, argv, "--rounds", 3));
    std::vector<double> plain_ms, mtp_ms, ratios;
    for (int64_t r = 0; r < rounds; ++r) {
      const double p = bench::TimeTrainingSteps(**model, B, 1, steps,
                                                [&] { (*opt)->Step(1e-3f); }).seconds;
      const double m = bench::TimeTrainingSteps(**mtp_model, B, 1, steps,
                                                [&] { (*mtp_opt)->Step(1e-3f); }).seconds;
      plain_ms.push_back(1000.0 * p / steps);
      mtp_ms.push_back(1000.0 * m / steps);
      ratios.push_back(m / p);
    }
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const double best_plain = *std::min_element(plain_ms.begin(), plain_ms.end());
    const double best_mtp = *std::min_element(mtp_ms.begin(), mtp_ms.end());
    std::string rows;
    for (int64_t r = 0; r < rounds; ++r) {
      char row[96];
      std::snprintf(row, sizeof(row), "%s[%.2f,%.2f,%.3f]", r ? "," : "", plain_ms[r], mtp_ms[r],
                    ratios[r]);
      rows += row;
    }
    std::printf("{\"impl\":\"smallem\",\"mtp\":%lld,\"mtp_params\":%lld,"
                "\"rounds_plain_mtp_ratio\":[%s],\"best_ms_plain\":%.2f,\"best_ms_mtp\":%.2f,"
                "\"best_rounds_ratio\":%.3f,\"mtp_step_ratio\":%.3f}\n",
                static_cast<long long>(mtp),
                static_cast<long long>(with_mtp.MtpParameterCount()), rows.c_str(), best_plain,
                best_mtp, best_mtp / best_plain, sorted[sorted.size() / 2]);
  }
  return 0;
}
