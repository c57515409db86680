// The local engine verbs of smallemctl: train, eval, generate. Each takes a
// plain options struct (flags are parsed in cli/main.cc) and returns the
// process exit code: 0 success, 1 failure, 2 bad input.
#ifndef SMALLEM_CLI_TRAIN_COMMAND_H_
#define SMALLEM_CLI_TRAIN_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace smallem {

struct TrainArgs {
  nlohmann::json spec;       // run-spec keys given on the command line
  std::string spec_file;     // --spec FILE.json, merged under the flags
  std::string out = "runs/latest";
  int threads = 0;           // 0 = every core (CPU only)
  // "cpu" or "cuda:N" (bf16 activations and matmuls, kernels/cuda_backend.h); cuda:N in a
  // build without CUDA is an error that says so.
  std::string device = "cpu";
  bool json_progress = false;  // JSON lines on stdout (for machines)
  // Times and counts every backend call (engine/profiler.h) and prints the
  // mean per-step table to stderr after training.
  bool profile = false;
};
int RunTrain(const TrainArgs& args);

// Evaluation settings not given here come from the result.json next to the
// weights (the run that wrote them), else from RunSpec's defaults, so that
// `eval --weights W --data D` scores what `train` scored and reproduces its
// loss.
struct EvalArgs {
  std::string weights;
  std::string data;
  std::optional<int64_t> eval_batches;     // validation batches K
  std::optional<int64_t> eval_batch_size;  // windows per forward pass
  int threads = 0;
};
int RunEval(const EvalArgs& args);

struct GenerateArgs {
  std::string weights;
  std::string tokenizer;  // default: tokenizer.json next to the weights
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 40;
  int64_t seed = 1;
};
int RunGenerate(const GenerateArgs& args);

}  // namespace smallem

#endif  // SMALLEM_CLI_TRAIN_COMMAND_H_
