#include "cli/train_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "cli/progress.h"
#include "engine/arena.h"
#include "engine/cpu/cpu_backend.h"
#include "corpus/dataset.h"
#include "corpus/tokenizer.h"
#include "engine/model/generator.h"
#include "engine/model/weights.h"
#include "engine/profiler.h"
#include "engine/train/evaluate.h"
#include "engine/train/progress_events.h"
#include "engine/train/trainer.h"
#include "engine/train/validation_text.h"
#include "runspec/run_result.h"
#include "runspec/run_spec_keys.h"
#ifdef SMALLEM_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace smallem {
namespace {

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("%s: cannot open", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", path));
  return j;
}

// The backend --device names: "cpu" (with `threads`) or "cuda:N".
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device, int threads) {
  if (device == "cpu") {
    ASSIGN_OR_RETURN(const CpuBackend::Options options,
                     CpuBackend::OptionsFromEnvironment(threads));
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options));
  }
  int index = -1;
  if (!device.starts_with("cuda:") || !absl::SimpleAtoi(device.substr(5), &index) || index < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--device %s: expected cpu or cuda:N (N a GPU index, e.g. cuda:0)", device));
  }
#ifdef SMALLEM_HAVE_CUDA
  return CreateCudaBackend(index, kTrainingMatmulPrecision);
#else
  return absl::InvalidArgumentError(absl::StrFormat(
      "--device %s: this smallemctl was built without CUDA (scripts/demo builds the CPU "
      "path only; scripts/build adds the CUDA backend where nvcc exists); use --device cpu",
      device));
#endif
}

// The run spec of --spec FILE: a run spec, or a run's result.json (whose
// "config" is the spec it ran), so that a run can be reproduced from its
// directory.
// The line (from 1) of `text` where the object key `key` is written — its
// first occurrence as "key" followed by a colon, at or after `from`; 0 when
// it cannot be found (an escaped key).
int JsonKeyLine(const std::string& text, const std::string& key, size_t from) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  for (size_t at = text.find(quoted, from); at != std::string::npos;
       at = text.find(quoted, at + 1)) {
    const size_t next = text.find_first_not_of(" \t\r\n", at + quoted.size());
    if (next != std::string::npos && text[next] == ':') {
      return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
    }
  }
  return 0;
}

// The run spec of a --spec file: the file itself, or a result.json's
// "config". A key no run spec has is named with its line and the nearest
// key ("spec.json:3: unknown key "lrr" (did you mean "lr"?)"), before any
// value is read.
absl::StatusOr<nlohmann::json> ReadSpecFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  nlohmann::json file = nlohmann::json::parse(text, nullptr, false);
  if (file.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", path));
  }
  if (!file.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expected a JSON object (a run spec, or a run's result.json)", path));
  }
  size_t spec_from = 0;  // where the spec's own keys start in the text
  if (file.contains(result_keys::kValNatsPerByte)) {
    const auto config = file.find(result_keys::kConfig);
    if (config == file.end() || !config->is_object()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: a result without its run spec (\"config\"); pass the run spec instead", path));
    }
    spec_from = text.find(absl::StrCat("\"", result_keys::kConfig, "\""));
    file = *config;
  }
  const std::vector<std::string>& keys = RunSpecKeyNames();
  for (auto it = file.begin(); it != file.end(); ++it) {
    if (std::find(keys.begin(), keys.end(), it.key()) != keys.end()) continue;
    const int line = JsonKeyLine(text, it.key(), spec_from == std::string::npos ? 0 : spec_from);
    const absl::Status unknown = UnknownRunSpecKey(it.key());
    return absl::InvalidArgumentError(
        absl::StrCat(path, line > 0 ? absl::StrCat(":", line) : "", ": ", unknown.message()));
  }
  return file;
}

// The run spec train runs: the --spec file's keys under the flags'.
absl::StatusOr<RunSpec> MergeTrainSpec(const nlohmann::json& file_spec,
                                       const nlohmann::json& flags) {
  nlohmann::json spec_json = file_spec.is_object() ? file_spec : nlohmann::json::object();
  // The flags override the file, a budget whole: --minutes replaces the
  // file's steps, --steps its minutes.
  if (flags.contains("steps") || flags.contains("minutes")) {
    spec_json.erase("steps");
    spec_json.erase("minutes");
  }
  for (auto it = flags.begin(); it != flags.end(); ++it) spec_json[it.key()] = *it;
  // A preset on the command line replaces the file's pieces it names.
  if (flags.contains("arch")) {
    for (const char* k : {"norm", "feed_forward", "positions", "bias"}) {
      if (!flags.contains(k)) spec_json.erase(k);
    }
  }
  ASSIGN_OR_RETURN(RunSpec spec, RunSpec::FromJson(spec_json));
  if (spec.data.empty()) {
    return absl::InvalidArgumentError(
        "--data is required: the prepared dataset directory to train on (make one with "
        "`smallemctl data prepare --out data/default`, then pass --data data/default), or a "
        "--spec file that names it");
  }
  return spec;
}

}  // namespace

int RunTrain(const TrainArgs& args) {
  nlohmann::json file_spec = nlohmann::json::object();
  if (!args.spec_file.empty()) {
    absl::StatusOr<nlohmann::json> file = ReadSpecFile(args.spec_file);
    if (!file.ok()) return ReportError(file.status());
    file_spec = *std::move(file);
  }
  absl::StatusOr<RunSpec> spec = MergeTrainSpec(file_spec, args.spec);
  if (!spec.ok()) return ReportError(spec.status());

  absl::StatusOr<std::unique_ptr<Backend>> created = CreateBackend(args.device, args.threads);
  if (!created.ok()) return ReportError(created.status());
  // --profile: every call goes through the profiler to the real backend.
  std::unique_ptr<ProfilingBackend> profiler;
  if (args.profile) profiler = std::make_unique<ProfilingBackend>(**created);
  Backend& backend = profiler ? *profiler : **created;
  ProgressLine line(stderr);
  TrainOptions options{.out_dir = args.out, .cuda_graphs = CudaGraphsFromEnvironment()};
  const int64_t steps = spec->budget.steps.value_or(0);
  options.progress_every = args.json_progress ? 10 : std::max<int64_t>(1, steps / 200);
  options.on_warning = [&](const std::string& w) {
    line.Finish();
    std::fprintf(stderr, "warning: %s\n", w.c_str());
  };
  options.on_progress = [&](const TrainProgress& p) {
    if (args.json_progress) {
      // The worker's child's line (engine/train/progress_events.h).
      std::printf("%s\n", FormatProgressLine(p).c_str());
      std::fflush(stdout);
      return;
    }
    line.Update(absl::StrFormat("step %d/%d %s loss %.4f  %.0f tok/s  elapsed %s  ETA %s", p.step,
                                p.total_steps,
                                FormatBar(static_cast<double>(p.step) / std::max<int64_t>(1, p.total_steps)),
                                p.loss, p.tokens_per_s, FormatDuration(p.elapsed_s),
                                FormatDuration(p.eta_s)) +
                    (p.max_over_mean_load > 0
                         ? absl::StrFormat("  expert load max/mean %.2f", p.max_over_mean_load)
                         : std::string()),
                p.step == p.total_steps);
  };
  if (!args.json_progress) {
    const std::string where =
        args.device == "cpu"
            ? absl::StrCat(
                  CountedNoun(static_cast<CpuBackend&>(**created).threads(), "thread", "threads"),
                  ", products on ", static_cast<CpuBackend&>(**created).GemmLibrary())
            : absl::StrFormat("%s, bf16 activations and matmuls", backend.Name());
    std::fprintf(stderr, "training on %s (%s): %s\n", backend.DeviceClass().c_str(),
                 where.c_str(), spec->ToJson().dump().c_str());
  }
  absl::StatusOr<nlohmann::json> result = Train(*spec, backend, options);
  line.Finish();
  if (!result.ok()) return ReportError(result.status());
  if (profiler) std::fprintf(stderr, "%s", profiler->FormatTable().c_str());
  if (args.json_progress) {
    std::printf("%s\n", FormatResultLine(*result).c_str());
    return 0;
  }
  if (IsDivergedResultJson(*result)) {
    absl::StatusOr<DivergedResult> diverged = DivergedResult::FromJson(*result);
    if (!diverged.ok()) return ReportError(diverged.status());
    std::fprintf(stderr,
                 "training diverged at step %lld: a loss or gradient norm was not finite "
                 "(last finite loss %s); lower --lr or raise --warmup\n",
                 static_cast<long long>(diverged->diverged_step),
                 diverged->last_finite_loss
                     ? absl::StrFormat("%.4f", *diverged->last_finite_loss).c_str()
                     : "none");
    return kExitError;
  }
  // The trainer's own result: every field the lines below read is there.
  absl::StatusOr<RunResult> r = RunResult::FromStoredJson(*result);
  if (!r.ok()) return ReportError(r.status());
  absl::PrintF("validation: %.4f nats/byte, %.4f nats/token, %.4f bits/byte (%d spans × %d "
               "target tokens)\n",
               r->val_nats_per_byte, r->val_nats_per_token.value_or(0),
               r->val_bits_per_byte.value_or(0), r->eval_spans.value_or(0),
               kValidationSpanTokens);
  std::printf("trained %d steps, %d tokens in %.1f s (%.0f tokens/s), %d parameters\n",
              r->steps.value_or(0), r->tokens.value_or(0), r->train_seconds.value_or(0),
              r->tokens_per_s.value_or(0), r->params.value_or(0));
  if (r->val_mtp_nats_per_token) {
    // Multi-token prediction: each depth's validation loss (the lines above
    // are next-token), and the parameters only training uses.
    std::string depths;
    for (double d : *r->val_mtp_nats_per_token) {
      absl::StrAppendFormat(&depths, "%s%.4f", depths.empty() ? "" : ", ", d);
    }
    absl::PrintF("mtp depths: %s nats/token; %d more parameters, not used to generate\n", depths,
                 r->mtp_params.value_or(0));
  }
  if (!args.out.empty()) {
    std::printf("wrote %s/weights.safetensors and %s/result.json\n", args.out.c_str(), args.out.c_str());
    std::printf("next: smallemctl generate --weights %s/weights.safetensors --prompt \"The \"\n",
                args.out.c_str());
  }
  return 0;
}

int RunEval(const EvalArgs& args) {
  // The settings of the run that wrote the weights, where its result is
  // beside them; flags override them.
  RunSpec defaults;
  int64_t eval_batches = defaults.eval_batches, eval_batch_size = defaults.eval_batch_size;
  const std::string result_path =
      (std::filesystem::path(args.weights).parent_path() / "result.json").string();
  nlohmann::json recorded;
  std::string source = "defaults";
  if (std::filesystem::exists(result_path)) {
    absl::StatusOr<nlohmann::json> file = ReadJsonFile(result_path);
    if (!file.ok()) return ReportError(file.status());
    recorded = *file;
    const nlohmann::json config = recorded.value(result_keys::kConfig, nlohmann::json::object());
    if (!config.is_object() ||
        !config.value("eval_batches", nlohmann::json()).is_number_integer()) {
      return ReportError(absl::InvalidArgumentError(absl::StrFormat(
          "%s has no config.eval_batches: pass --eval-batches and --eval-batch-size",
          result_path)));
    }
    eval_batches = config["eval_batches"].get<int64_t>();
    // Results from before docs/validation.md stored 0 ("the training
    // batch"); the pass size does not change the scored text.
    eval_batch_size = std::max<int64_t>(config.value("eval_batch_size", int64_t{0}), 0);
    if (eval_batch_size == 0) eval_batch_size = defaults.eval_batch_size;
    source = result_path;
  }
  if (args.eval_batches) eval_batches = *args.eval_batches;
  if (args.eval_batch_size) eval_batch_size = *args.eval_batch_size;
  if (eval_batches <= 0 || eval_batch_size <= 0) {
    return ReportError(absl::InvalidArgumentError(absl::StrFormat(
        "--eval-batches %d --eval-batch-size %d: both must be positive (settings from %s)",
        eval_batches, eval_batch_size, source)));
  }

  absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(args.threads);
  if (!options.ok()) return ReportError(options.status());
  CpuBackend backend(*options);
  absl::StatusOr<std::unique_ptr<Model>> model = LoadWeights(args.weights, backend);
  if (!model.ok()) return ReportError(model.status());
  absl::StatusOr<Dataset> data = Dataset::Open(args.data);
  if (!data.ok()) return ReportError(data.status());
  if (data->vocab() != (*model)->config().vocab) {
    return ReportError(absl::InvalidArgumentError(absl::StrFormat(
        "%s has vocab %d but the weights were trained with vocab %d", args.data, data->vocab(),
        (*model)->config().vocab)));
  }
  absl::StatusOr<ValidationText> text =
      PlanValidationText(static_cast<int64_t>(data->val.size()), eval_batches);
  if (!text.ok()) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", args.data, text.status().message())));
  }
  Arena arena(backend);
  const EvalResult r = Evaluate(**model, arena, data->val, data->tokenizer.token_bytes(), *text,
                                eval_batch_size);
  const std::string fingerprint =
      ValidationFingerprint(*text, data->meta.value("content_hash", ""));
  absl::PrintF("validation: %.4f nats/byte, %.4f nats/token, %.4f bits/byte (%d spans × %d "
               "target tokens)\n",
               r.nats_per_byte, r.nats_per_token, r.bits_per_byte, r.spans, kValidationSpanTokens);
  absl::PrintF("eval_fingerprint %s (settings from %s: eval_batches %d, eval_batch_size %d)\n",
               fingerprint, source, eval_batches, eval_batch_size);
  if (absl::StatusOr<RunResult> run = RunResult::FromStoredJson(recorded); run.ok()) {
    if (run->eval_fingerprint.value_or("") == fingerprint) {
      std::printf("the run recorded %.4f nats/byte on the same validation text (%s)\n",
                  run->val_nats_per_byte, run->device.value_or("its device").c_str());
    } else {
      std::printf("the run recorded %.4f nats/byte on other validation text (another dataset, "
                  "eval_batches or validation format)\n",
                  run->val_nats_per_byte);
    }
  }
  return 0;
}

int RunGenerate(const GenerateArgs& args) {
  absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(1);
  if (!options.ok()) return ReportError(options.status());
  CpuBackend backend(*options);
  absl::StatusOr<std::unique_ptr<Model>> model = LoadWeights(args.weights, backend);
  if (!model.ok()) return ReportError(model.status());
  const std::string tok_path =
      !args.tokenizer.empty()
          ? args.tokenizer
          : (std::filesystem::path(args.weights).parent_path() / "tokenizer.json").string();
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Load(tok_path);
  if (!tokenizer.ok()) return ReportError(tokenizer.status());
  if (tokenizer->vocab_size() != (*model)->config().vocab) {
    return ReportError(absl::InvalidArgumentError(absl::StrFormat(
        "%s has vocab %d, the weights %d: pass the dataset's tokenizer with --tokenizer", tok_path,
        tokenizer->vocab_size(), (*model)->config().vocab)));
  }
  std::vector<int32_t> prompt = tokenizer->Encode(args.prompt.empty() ? "\n" : args.prompt);
  Generator generator(**model);
  std::printf("%s", args.prompt.c_str());
  generator.Generate(prompt, args.tokens,
                     SampleOptions{.temperature = args.temperature, .top_k = args.top_k,
                                   .seed = static_cast<uint64_t>(args.seed)},
                     [&](int32_t id) {
                       std::string_view text = tokenizer->TokenText(id);
                       std::fwrite(text.data(), 1, text.size(), stdout);
                       std::fflush(stdout);
                     });
  std::printf("\n");
  return 0;
}

}  // namespace smallem
