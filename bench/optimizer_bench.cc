// Optimizer step cost: full training steps (forward, backward, update) of
// the tiny CPU config under AdamW, Muon and its variants, each timed in
// alternating rounds (the best round counts: on a shared machine the others
// carry the neighbours' load), with the ratio to AdamW measured
// in the same run, then one profiled pass per optimizer for its optimizer
// time and matmul counts (engine/profiler.h). docs/benchmarks.md § Muon.
//
//   smallem_optimizer_bench [--threads 2 --steps 20 --warmup 3 --rounds 3
//                            --layers 4 --embed 128 --heads 4 --context 128
//                            --batch 16 --vocab 256 --arch gpt2
//                            --optimizers "adamw;muon;muon:short" --tables 1]
//
// --tables 1 also prints each optimizer's profiler table (what
// `smallemctl train --profile` prints) on stderr.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "bench/training_steps.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/profiler.h"
#include "runspec/run_spec.h"

namespace {

using namespace smallem;
using bench::Flag;
using bench::StringFlag;

struct Setup {
  ModelConfig config;
  int64_t batch = 16;
};

// Runs warmup + steps training steps with `optimizer` on `backend`; returns
// the mean seconds of the timed steps.
double TimeSteps(const Setup& setup, const std::string& optimizer, Backend& backend,
                 int64_t warmup, int64_t steps) {
  auto model = Model::Create(setup.config, backend);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(2);
  }
  (*model)->Initialize(1);
  RunSpec spec;
  spec.optimizer = optimizer;
  auto opt = CreateOptimizer(spec, **model);
  if (!opt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(opt.status().message()).c_str());
    std::exit(2);
  }
  const bench::StepTiming timing =
      bench::TimeTrainingSteps(**model, setup.batch, warmup, steps, [&] { (*opt)->Step(1.0f); });
  return timing.seconds / steps;
}

}  // namespace

int main(int argc, char** argv) {
  auto arch = Architecture::FromPreset(StringFlag(argc, argv, "--arch", "gpt2"));
  if (!arch.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arch.status().message()).c_str());
    return 2;
  }
  const Setup setup{.config = ModelConfig{.vocab = Flag(argc, argv, "--vocab", 256),
                                          .context = Flag(argc, argv, "--context", 128),
                                          .layers = Flag(argc, argv, "--layers", 4),
                                          .heads = Flag(argc, argv, "--heads", 4),
                                          .embed = Flag(argc, argv, "--embed", 128),
                                          .architecture = *arch},
                    .batch = Flag(argc, argv, "--batch", 16)};
  const int64_t steps = Flag(argc, argv, "--steps", 20), warmup = Flag(argc, argv, "--warmup", 3);
  const int64_t rounds = Flag(argc, argv, "--rounds", 3);
  const std::vector<std::string> optimizers = absl::StrSplit(
      StringFlag(argc, argv, "--optimizers",
                 "adamw;muon;muon:short;muon,stack=off;muon:short,stack=off;"
                 "muon:short,period=3;muon:short,norm;muon:short,boost=1.5"),
      ';');
  CpuBackend cpu(bench::CpuOptions(static_cast<int>(Flag(argc, argv, "--threads", 2))));

  // An untimed run first (thread pools, page faults), then alternating
  // rounds so drifting machine load hits every optimizer alike.
  TimeSteps(setup, optimizers[0], cpu, 1, 2);
  std::vector<std::vector<double>> seconds(optimizers.size());
  for (int64_t round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < optimizers.size(); ++i) {
      seconds[i].push_back(TimeSteps(setup, optimizers[i], cpu, warmup, steps));
    }
  }
  // Ratios are to adamw when it is in the list, else to the first.
  const size_t base = static_cast<size_t>(
      std::find(optimizers.begin(), optimizers.end(), "adamw") - optimizers.begin()) %
      optimizers.size();
  std::vector<double> best(optimizers.size());
  for (size_t i = 0; i < optimizers.size(); ++i) {
    best[i] = *std::min_element(seconds[i].begin(), seconds[i].end());
  }

  std::printf("%s, %d threads: L=%lld C=%lld H=%lld T=%lld B=%lld V=%lld (%s), "
              "best of %lld rounds of %lld steps\n",
              cpu.DeviceClass().c_str(), cpu.threads(),
              static_cast<long long>(setup.config.layers),
              static_cast<long long>(setup.config.embed),
              static_cast<long long>(setup.config.heads),
              static_cast<long long>(setup.config.context),
              static_cast<long long>(setup.batch), static_cast<long long>(setup.config.vocab),
              StringFlag(argc, argv, "--arch", "gpt2").c_str(), static_cast<long long>(rounds),
              static_cast<long long>(steps));
  std::printf("| optimizer | ms/step | vs %s | optimizer ms/step | matmuls/step | of which optimizer |\n",
              optimizers[base].c_str());
  std::printf("|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < optimizers.size(); ++i) {
    // One profiled pass for the optimizer's share and the counts.
    ProfilingBackend profiler(cpu);
    TimeSteps(setup, optimizers[i], profiler, 1, std::max<int64_t>(3, steps / 4));
    if (Flag(argc, argv, "--tables", 0)) {
      std::fprintf(stderr, "%s\n%s\n", optimizers[i].c_str(), profiler.FormatTable().c_str());
    }
    const auto& profile = profiler.steps();
    double optimizer_s = 0, calls = 0, optimizer_calls = 0;
    const int matmul = static_cast<int>(Op::kMatmul);
    for (size_t s = 1; s < profile.size(); ++s) {
      optimizer_s += profile[s].optimizer_seconds;
      calls += profile[s].families[matmul].calls;
      optimizer_calls += profile[s].families[matmul].optimizer_calls;
    }
    const double n = static_cast<double>(profile.size() - 1);
    std::printf("| `%s` | %.1f | %.2f× | %.1f | %.0f | %.0f |\n", optimizers[i].c_str(),
                1e3 * best[i], best[i] / best[base], 1e3 * optimizer_s / n, calls / n,
                optimizer_calls / n);
  }
  return 0;
}
