// GPU training throughput of the engine: full training steps (forward,
// backward, AdamW with clipping) of the reference model (docs/model.md; the
// engine: V 8192, T 512, L 8, H 8, C 512; batch 16) on random tokens, on one
// CUDA device, for each preset and matmul precision asked, with AdamW or the
// optimizer given (--optimizer muon:short: Muon's step against AdamW's). The steps are the
// ones Train() runs, through the same StepRunner (engine/train/step_runner.h):
// the split resident on the device, batch starts and optimizer scalars
// staged with one upload per step, the whole step replayed from a CUDA graph
// after the warm-up. Each combination is timed twice on the same model:
// every step eager, then replayed from graphs. Prints one JSON line per
// (arch, precision):
//
//   {"impl":"smallem","device":"NVIDIA H200","arch":"gpt2","precision":"bf16",
//    "optimizer":"adamw","activations":"bf16","experts":0,"mtp":0,
//    "params":29676544,"batch":16,"context":512,"steps":30,
//    "tokens_per_s":…,"ms_per_step":…,"flops_per_token":…,"mfu":…,
//    "reference_run_s":…,"loss":…,"peak_memory_bytes":…,
//    "cuda_graphs":true,"capture_ms":…,
//    "eager_tokens_per_s":…,"eager_ms_per_step":…,"graph_speedup":…}
//
// tokens_per_s, ms_per_step, mfu, reference_run_s and loss are those of the
// graph steps (what training runs; of the eager steps when the backend
// captured none: cuda_graphs false); eager_* are the eager steps' and
// graph_speedup = tokens_per_s / eager_tokens_per_s. capture_ms is the time
// to record and instantiate the step's graph (not timed as a step). MFU
// counts 6N + 6·L·C·T model FLOPs per token (as the trainer does) against
// the device's dense bf16 peak (989 TFLOP/s on H100/H200), in both
// precisions. reference_run_s projects the measured step time onto the
// 6000-step reference budget. The peer is bench/torch_gpu_peer.py;
// scripts/gpu-check runs both and prints the ratio.
//
//   smallem_gpu_bench [--device 0] [--arch gpt2,modern] [--precision f32,bf16]
//                     [--optimizer adamw] [--steps 30] [--warmup 5] [--batch 16]
//                     [--vocab 8192]
//                     [--context 512] [--layers 8] [--heads 8] [--embed 512]
//                     [--experts 0] [--mtp 0]
//
// --warmup untimed steps precede the timed ones in each mode; it must exceed
// the trainer's eager warm-up (kWarmupSteps = 3), so that the graph is
// captured before the timing starts. Exit status 0 when every combination
// ran, 1 otherwise (the failing line carries "error"), 2 for bad flags.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/autograd/tape.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "engine/train/batches.h"
#include "engine/train/step_runner.h"
#include "kernels/cuda_backend.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"

namespace smallem {
namespace {

// The reference budget: 6000 steps of 16 sequences.
constexpr int64_t kReferenceSteps = 6000;
// Tokens of the random split the steps gather from (at least 4 batches).
constexpr int64_t kSplitTokens = int64_t{1} << 22;

const char* FlagValue(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return nullptr;
}

int64_t IntFlag(int argc, char** argv, const char* name, int64_t fallback) {
  const char* v = FlagValue(argc, argv, name);
  return v != nullptr ? std::atoll(v) : fallback;
}

std::vector<std::string> ListFlag(int argc, char** argv, const char* name,
                                  const char* fallback) {
  const char* v = FlagValue(argc, argv, name);
  std::stringstream in(v != nullptr ? v : fallback);
  std::vector<std::string> items;
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

struct BenchOptions {
  int device = 0;
  int64_t batch = 16, steps = 30, warmup = 5;
  std::string optimizer = "adamw";  // an optimizer spec (runspec/optimizer_spec.h)
};

void Print(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

struct Timing {
  double seconds = 0;    // of the timed steps, from an idle device to an idle device
  double capture_s = 0;  // recording and instantiating graphs (in the warm-up)
  float loss = 0;        // of the last step
  bool graphs_used = false;
};

// Runs warmup + steps training steps through a StepRunner, as Train() does,
// eagerly or with graphs, and times the last `steps`.
absl::StatusOr<Timing> TimeSteps(Model& model, Optimizer& optimizer, Arena& arena, Tape& tape,
                                 std::span<const uint16_t> split, TrainBatches& batches,
                                 bool graphs, const BenchOptions& options) {
  Backend& be = model.backend();
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::Create(
      model, optimizer, arena, tape, split,
      StepRunner::Options{.batch = options.batch, .time = model.config().context,
                          .graphs = graphs});
  if (!runner.ok()) return runner.status();
  Timing timing;
  std::vector<int64_t> starts(static_cast<size_t>(options.batch));
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  for (int64_t step = 0; step < options.warmup + options.steps; ++step) {
    if (step == options.warmup) {
      // The warm-up sized the arena, planned every GEMM and captured the
      // graph; time from an idle device.
      be.Synchronize();
      start = Clock::now();
    }
    batches.NextStarts(starts.data());
    // A constant learning rate: the schedule costs nothing on the device.
    if (absl::Status s = (*runner)->Run(step, starts, 1.0f); !s.ok()) return s;
    timing.capture_s += (*runner)->last_capture_seconds();
    // No read-back inside the timed loop: the host runs ahead of the GPU,
    // as the trainer does between progress reports.
  }
  be.Synchronize();
  timing.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  timing.loss = (*runner)->ReadLoss();
  timing.graphs_used = (*runner)->graphs_used();
  return timing;
}

// Trains `config` for warmup + steps steps eagerly, then as many with
// graphs, and returns the JSON line (with "error" when something failed).
nlohmann::json RunOne(const ModelConfig& config, const std::string& arch_name,
                      MatmulPrecision precision, const BenchOptions& options) {
  nlohmann::json line = {{"impl", "smallem"},
                         {"arch", arch_name},
                         {"precision", precision == MatmulPrecision::kBf16 ? "bf16" : "f32"},
                         {"optimizer", options.optimizer},
                         {"batch", options.batch},
                         {"context", config.context},
                         {"experts", config.moe.experts},
                         {"mtp", config.mtp}};
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options.device, precision);
  if (!backend.ok()) {
    line["error"] = std::string(backend.status().message());
    return line;
  }
  Backend& be = **backend;
  line["activations"] = be.ActivationDType() == DType::kBF16 ? "bf16" : "f32";
  line["device"] = be.DeviceClass();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, be);
  if (!model.ok()) {
    line["error"] = std::string(model.status().message());
    return line;
  }
  (*model)->Initialize(1);
  RunSpec spec;  // weight decay 0.1, clipping at 1, as a default run
  spec.lr = 1e-3;
  spec.optimizer = options.optimizer;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  if (!optimizer.ok()) {
    line["error"] = std::string(optimizer.status().message());
    return line;
  }

  const int64_t B = options.batch, T = config.context;
  // Random tokens stand in for a training split: the step gathers its
  // batches from them on the device, in the trainer's shuffled order.
  std::vector<uint16_t> split(
      static_cast<size_t>(std::max<int64_t>(kSplitTokens, 4 * B * (T + 1))));
  Rng rng(1);
  for (uint16_t& token : split) token = static_cast<uint16_t>(rng.Below(config.vocab));
  Arena arena(be);
  Tape tape(be, arena);
  TrainBatches batches(split, B, T, /*seed=*/1);

  absl::StatusOr<Timing> eager =
      TimeSteps(**model, **optimizer, arena, tape, split, batches, /*graphs=*/false, options);
  if (!eager.ok()) {
    line["error"] = std::string(eager.status().message());
    return line;
  }
  absl::StatusOr<Timing> graph =
      TimeSteps(**model, **optimizer, arena, tape, split, batches, /*graphs=*/true, options);
  if (!graph.ok()) {
    line["error"] = std::string(graph.status().message());
    return line;
  }

  const int64_t params = (*model)->ParameterCount();
  const double flops_per_token =
      6.0 * static_cast<double>(params) + 6.0 * config.layers * config.embed * config.context;
  const double tokens = static_cast<double>(options.steps * B * T);
  const double tokens_per_s = tokens / graph->seconds;
  const double eager_tokens_per_s = tokens / eager->seconds;
  const double step_s = graph->seconds / static_cast<double>(options.steps);
  line["params"] = params;
  line["steps"] = options.steps;
  line["tokens_per_s"] = tokens_per_s;
  line["ms_per_step"] = 1000.0 * step_s;
  line["flops_per_token"] = flops_per_token;
  line["mfu"] = be.PeakFlops() > 0 ? nlohmann::json(tokens_per_s * flops_per_token / be.PeakFlops())
                                   : nlohmann::json(nullptr);
  line["reference_run_s"] = step_s * kReferenceSteps;
  line["loss"] = graph->loss;
  line["peak_memory_bytes"] = be.PeakMemoryBytes();
  line["cuda_graphs"] = graph->graphs_used;
  line["capture_ms"] = 1000.0 * graph->capture_s;
  line["eager_tokens_per_s"] = eager_tokens_per_s;
  line["eager_ms_per_step"] = 1000.0 * eager->seconds / static_cast<double>(options.steps);
  line["graph_speedup"] = tokens_per_s / eager_tokens_per_s;
  return line;
}

int Main(int argc, char** argv) {
  BenchOptions options;
  options.device = static_cast<int>(IntFlag(argc, argv, "--device", 0));
  options.batch = IntFlag(argc, argv, "--batch", 16);
  options.steps = IntFlag(argc, argv, "--steps", 30);
  options.warmup = IntFlag(argc, argv, "--warmup", 5);
  if (const char* optimizer = FlagValue(argc, argv, "--optimizer")) options.optimizer = optimizer;
  if (options.batch <= 0 || options.steps <= 0 || options.warmup <= kWarmupSteps) {
    std::fprintf(stderr,
                 "smallem_gpu_bench: --batch and --steps must be positive, --warmup at "
                 "least %lld (the trainer's %lld eager steps, then the capture)\n",
                 static_cast<long long>(kWarmupSteps + 1), static_cast<long long>(kWarmupSteps));
    return 2;
  }
  std::vector<std::pair<std::string, Architecture>> archs;
  for (const std::string& name : ListFlag(argc, argv, "--arch", "gpt2,modern")) {
    absl::StatusOr<Architecture> arch = Architecture::FromPreset(name);
    if (!arch.ok()) {
      std::fprintf(stderr, "smallem_gpu_bench: --arch: %s\n",
                   std::string(arch.status().message()).c_str());
      return 2;
    }
    archs.emplace_back(name, *arch);
  }
  std::vector<MatmulPrecision> precisions;
  for (const std::string& name : ListFlag(argc, argv, "--precision", "f32,bf16")) {
    if (name == "f32") {
      precisions.push_back(MatmulPrecision::kF32);
    } else if (name == "bf16") {
      precisions.push_back(MatmulPrecision::kBf16);
    } else {
      std::fprintf(stderr,
                   "smallem_gpu_bench: --precision: unknown \"%s\" (expected f32 or bf16)\n",
                   name.c_str());
      return 2;
    }
  }

  int status = 0;
  for (const auto& [name, arch] : archs) {
    ModelConfig config{.vocab = IntFlag(argc, argv, "--vocab", 8192),
                       .context = IntFlag(argc, argv, "--context", 512),
                       .layers = IntFlag(argc, argv, "--layers", 8),
                       .heads = IntFlag(argc, argv, "--heads", 8),
                       .embed = IntFlag(argc, argv, "--embed", 512),
                       .architecture = arch};
    // A mixture of experts with the dense model's active parameters, and
    // multi-token prediction: their step against the plain one's.
    config.moe.experts = IntFlag(argc, argv, "--experts", 0);
    config.mtp = IntFlag(argc, argv, "--mtp", 0);
    if (absl::Status s = config.Validate(); !s.ok()) {
      std::fprintf(stderr, "smallem_gpu_bench: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    if (config.vocab > 65536) {
      // The split holds u16 tokens, as a dataset does.
      std::fprintf(stderr, "smallem_gpu_bench: --vocab %lld exceeds 65536\n",
                   static_cast<long long>(config.vocab));
      return 2;
    }
    for (MatmulPrecision precision : precisions) {
      const nlohmann::json line = RunOne(config, name, precision, options);
      if (line.contains("error")) status = 1;
      Print(line);
    }
  }
  return status;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) { return smallem::Main(argc, argv); }
