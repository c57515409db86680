// GPU training throughput of the engine: full training steps (forward,
// backward, AdamW with clipping) of the reference model (DESIGN.md § The
// engine: V 8192, T 512, L 8, H 8, C 512; batch 16) on random tokens, on one
// CUDA device, for each preset and matmul precision asked. Prints one JSON
// line per (arch, precision):
//
//   {"impl":"smallem","device":"NVIDIA H200","arch":"gpt2","precision":"bf16",
//    "params":29676544,"batch":16,"context":512,"steps":30,
//    "tokens_per_s":…,"ms_per_step":…,"flops_per_token":…,"mfu":…,
//    "reference_run_s":…,"loss":…,"peak_memory_bytes":…}
//
// MFU counts 6N + 6·L·C·T model FLOPs per token (as the trainer does)
// against the device's dense bf16 peak (989 TFLOP/s on H100/H200), in both
// precisions. reference_run_s projects the measured step time onto the
// 6000-step reference budget. The peer is bench/torch_gpu_peer.py;
// scripts/gpu-check runs both and prints the ratio.
//
//   smallem_gpu_bench [--device 0] [--arch gpt2,modern] [--precision f32,bf16]
//                     [--steps 30] [--warmup 5] [--batch 16] [--vocab 8192]
//                     [--context 512] [--layers 8] [--heads 8] [--embed 512]
//
// Exit status 0 when every combination ran, 1 otherwise (the failing line
// carries "error"), 2 for bad flags.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/random.h"
#include "engine/train/run_spec.h"
#include "kernels/cuda_backend.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

// The reference budget: 6000 steps of 16 sequences (DESIGN.md).
constexpr int64_t kReferenceSteps = 6000;

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
};

void Print(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

// Trains `config` for warmup + steps steps and returns the JSON line (with
// "error" when something failed before the timing).
nlohmann::json RunOne(const ModelConfig& config, const std::string& arch_name,
                      MatmulPrecision precision, const BenchOptions& options) {
  nlohmann::json line = {{"impl", "smallem"},
                         {"arch", arch_name},
                         {"precision", precision == MatmulPrecision::kBf16 ? "bf16" : "f32"},
                         {"batch", options.batch},
                         {"context", config.context}};
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(options.device, precision);
  if (!backend.ok()) {
    line["error"] = std::string(backend.status().message());
    return line;
  }
  Backend& be = **backend;
  line["device"] = be.DeviceClass();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, be);
  if (!model.ok()) {
    line["error"] = std::string(model.status().message());
    return line;
  }
  (*model)->Initialize(1);
  RunSpec spec;  // AdamW, weight decay 0.1, clipping at 1, as a default run
  spec.lr = 1e-3;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, **model);
  if (!optimizer.ok()) {
    line["error"] = std::string(optimizer.status().message());
    return line;
  }

  const int64_t B = options.batch, T = config.context;
  Arena arena(be);
  Tape tape(be, arena);
  Rng rng(1);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  Var loss;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  for (int64_t step = 0; step < options.warmup + options.steps; ++step) {
    if (step == options.warmup) {
      // The warmup steps allocated the arena and planned every GEMM; time
      // from an idle device.
      be.Synchronize();
      start = Clock::now();
    }
    for (int64_t i = 0; i < B * T; ++i) {
      inputs[i] = static_cast<int32_t>(rng.Below(config.vocab));
      targets[i] = static_cast<int32_t>(rng.Below(config.vocab));
    }
    arena.Reset();
    tape.Reset();
    Tensor in = arena.Allocate({B * T}, DType::kI32);
    Tensor tg = arena.Allocate({B * T}, DType::kI32);
    be.CopyToDevice(in.data, inputs.data(), in.bytes());
    be.CopyToDevice(tg.data, targets.data(), tg.bytes());
    (*model)->ZeroGrad();
    loss = Mean(tape, (*model)->Losses(tape, in, tg, B, T));
    tape.Backward(loss);
    (*optimizer)->Step(1.0f);
    // No read-back inside the timed loop: the host runs ahead of the GPU,
    // as the trainer does between progress reports.
  }
  be.Synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  float loss_value = 0;
  be.CopyToHost(&loss_value, tape.value(loss).data, sizeof(float));

  const int64_t params = (*model)->ParameterCount();
  const double flops_per_token =
      6.0 * static_cast<double>(params) + 6.0 * config.layers * config.embed * config.context;
  const double tokens_per_s = static_cast<double>(options.steps * B * T) / seconds;
  const double step_s = seconds / static_cast<double>(options.steps);
  line["params"] = params;
  line["steps"] = options.steps;
  line["tokens_per_s"] = tokens_per_s;
  line["ms_per_step"] = 1000.0 * step_s;
  line["flops_per_token"] = flops_per_token;
  line["mfu"] = be.PeakFlops() > 0 ? nlohmann::json(tokens_per_s * flops_per_token / be.PeakFlops())
                                   : nlohmann::json(nullptr);
  line["reference_run_s"] = step_s * kReferenceSteps;
  line["loss"] = loss_value;
  line["peak_memory_bytes"] = be.PeakMemoryBytes();
  return line;
}

int Main(int argc, char** argv) {
  BenchOptions options;
  options.device = static_cast<int>(IntFlag(argc, argv, "--device", 0));
  options.batch = IntFlag(argc, argv, "--batch", 16);
  options.steps = IntFlag(argc, argv, "--steps", 30);
  options.warmup = IntFlag(argc, argv, "--warmup", 5);
  if (options.batch <= 0 || options.steps <= 0 || options.warmup < 1) {
    std::fprintf(stderr, "smallem_gpu_bench: --batch and --steps must be positive, "
                         "--warmup at least 1\n");
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
    const ModelConfig config{.vocab = IntFlag(argc, argv, "--vocab", 8192),
                             .context = IntFlag(argc, argv, "--context", 512),
                             .layers = IntFlag(argc, argv, "--layers", 8),
                             .heads = IntFlag(argc, argv, "--heads", 8),
                             .embed = IntFlag(argc, argv, "--embed", 512),
                             .architecture = arch};
    if (absl::Status s = config.Validate(); !s.ok()) {
      std::fprintf(stderr, "smallem_gpu_bench: %s\n", std::string(s.message()).c_str());
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
