// The cost of a mixture-of-experts step on the CPU: full training steps
// (forward, backward, AdamW, bias balancing) of a MoE model against the
// dense model with the same active parameters (expert width = the dense
// width ÷ top_k, the default), both measured in this run, interleaved, over
// `--repeats` rounds. Prints each round's ratio, their median, and the
// ratio of the best rounds (the least disturbed by other work) as JSON.
// The target (docs/benchmarks.md): MoE step / dense step ≤ 1.2.
//
//   smallem_moe_bench --threads 2 [--arch modern|gpt2 --experts 8 --top-k 2 --layers 4
//                      --embed 128 --heads 4 --context 128 --batch 16 --steps 20
//                      --warmup 3 --repeats 3 --tables 0]
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
#include "engine/profiler.h"

namespace smallem {
namespace {

// Seconds per step of `config`, fresh model and optimizer. With a profiler
// (`--tables 1`), each update closes a profiled step.
double SecondsPerStep(const ModelConfig& config, Backend& be, int64_t batch, int64_t warmup,
                      int64_t steps, ProfilingBackend* profiler = nullptr) {
  auto model = Model::Create(config, be);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(2);
  }
  (*model)->Initialize(1);
  auto opt = AdamWOptimizer::Create(**model, AdamWOptions{});
  if (profiler != nullptr) profiler->BeginSteps();
  const bench::StepTiming timing = bench::TimeTrainingSteps(**model, batch, warmup, steps, [&] {
    if (profiler != nullptr) profiler->BeginOptimizer();
    (*opt)->Step(1e-3f);
    (*model)->BalanceExperts();
    if (profiler != nullptr) profiler->EndOptimizer();
  });
  return timing.seconds / static_cast<double>(steps);
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  using bench::StringFlag;
  const std::string arch_name = StringFlag(argc, argv, "--arch", "modern");
  auto arch = Architecture::FromPreset(arch_name);
  if (!arch.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arch.status().message()).c_str());
    return 2;
  }
  const ModelConfig dense{.vocab = Flag(argc, argv, "--vocab", 256),
                          .context = Flag(argc, argv, "--context", 128),
                          .layers = Flag(argc, argv, "--layers", 4),
                          .heads = Flag(argc, argv, "--heads", 4),
                          .embed = Flag(argc, argv, "--embed", 128),
                          .architecture = *arch};
  ModelConfig moe = dense;
  moe.moe = MoeConfig{.experts = Flag(argc, argv, "--experts", 8),
                      .top_k = Flag(argc, argv, "--top-k", 2)};
  if (absl::Status st = moe.Validate(); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 2;
  }
  const int64_t batch = Flag(argc, argv, "--batch", 16);
  const int64_t steps = Flag(argc, argv, "--steps", 20), warmup = Flag(argc, argv, "--warmup", 3);
  const int64_t repeats = Flag(argc, argv, "--repeats", 3);
  CpuBackend be(bench::CpuOptions(static_cast<int>(Flag(argc, argv, "--threads", 0))));

  std::vector<double> ratios;
  std::string rounds;
  double best_dense = 1e30, best_moe = 1e30;
  for (int64_t r = 0; r < repeats; ++r) {
    const double dense_s = SecondsPerStep(dense, be, batch, warmup, steps);
    const double moe_s = SecondsPerStep(moe, be, batch, warmup, steps);
    ratios.push_back(moe_s / dense_s);
    best_dense = std::min(best_dense, dense_s);
    best_moe = std::min(best_moe, moe_s);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s{\"dense_ms\":%.2f,\"moe_ms\":%.2f,\"ratio\":%.3f}",
                  r == 0 ? "" : ",", 1000 * dense_s, 1000 * moe_s, moe_s / dense_s);
    rounds += buf;
  }
  if (Flag(argc, argv, "--tables", 0)) {
    // Where each step's time goes, per op family, on stderr.
    const ModelConfig* configs[] = {&dense, &moe};
    for (const ModelConfig* c : configs) {
      ProfilingBackend profiler(be);
      SecondsPerStep(*c, profiler, batch, 1, std::max<int64_t>(3, steps / 2), &profiler);
      std::fprintf(stderr, "%s\n%s\n", c == &dense ? "dense" : "moe",
                   profiler.FormatTable().c_str());
    }
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"bench\":\"moe_step_over_dense_step\",\"arch\":\"%s\",\"threads\":%d,"
              "\"experts\":%lld,\"top_k\":%lld,\"expert_width\":%lld,\"dense_width\":%lld,"
              "\"dense_active_params\":%lld,\"moe_active_params\":%lld,\"moe_total_params\":%lld,"
              "\"rounds\":[%s],\"median_ratio\":%.3f,\"best_ratio\":%.3f,\"target\":1.2}\n",
              arch_name.c_str(), be.threads(), static_cast<long long>(moe.moe.experts),
              static_cast<long long>(moe.moe.top_k),
              static_cast<long long>(moe.moe.Width(dense.ff_hidden())),
              static_cast<long long>(dense.ff_hidden()),
              static_cast<long long>(dense.ActiveParameterCount()),
              static_cast<long long>(moe.ActiveParameterCount()),
              static_cast<long long>(moe.TotalParameterCount()), rounds.c_str(),
              sorted[sorted.size() / 2], best_moe / best_dense);
  return 0;
}
