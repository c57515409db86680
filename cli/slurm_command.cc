#include "cli/slurm_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string_view>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "rpc/auth.h"

namespace smallem::cli {
namespace {

namespace fs = std::filesystem;

// A word the script may carry unquoted on an #SBATCH line (sbatch reads
// those lines itself, without a shell).
bool IsSbatchWord(std::string_view s, std::string_view extra) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        extra.find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

absl::Status BadFlag(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
}

absl::Status CheckPath(absl::string_view flag, const std::string& path) {
  if (path.empty()) return BadFlag(flag, "must not be empty");
  if (path.find_first_of("\n\r") != std::string::npos || path.find('\0') != std::string::npos) {
    return BadFlag(flag, "a path on one line");
  }
  return absl::OkStatus();
}

// smallem-worker beside this smallemctl (an installation, or the build
// tree: cli/smallemctl beside worker/smallem-worker); else the bare name,
// for the nodes' PATH.
std::string DefaultWorkerBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate :
         {self.parent_path() / "smallem-worker",
          self.parent_path().parent_path() / "worker" / "smallem-worker"}) {
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return "smallem-worker";
}

}  // namespace

absl::Status CheckSlurmSubmitArgs(const SlurmSubmitArgs& args) {
  const size_t colon = args.coordinator.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(args.coordinator.substr(colon + 1), &port) || port <= 0 ||
      port > 65535 || !IsSbatchWord(args.coordinator, ".-:[]_")) {
    return BadFlag("--coordinator", "HOST:PORT as the nodes reach it, e.g. login1:7070 "
                                    "(not 127.0.0.1 unless the workers run on this machine)");
  }
  if (args.nodes < 1 || args.nodes > 100'000) return BadFlag("--nodes", "at least 1");
  if (args.gpus_per_node < 0 || args.gpus_per_node > 1024) {
    return BadFlag("--gpus-per-node", "0 (none asked for) or more");
  }
  if (args.cpus_per_node < 0 || args.cpus_per_node > 100'000) {
    return BadFlag("--cpus-per-node", "0 (Slurm's default) or more");
  }
  if (args.threads < 0) return BadFlag("--threads", "0 (all) or more");
  if (!args.time.empty()) {
    std::vector<absl::string_view> parts = absl::StrSplit(args.time, ':');
    int hours = -1, minutes = -1;
    if (parts.size() != 2 || parts[1].size() != 2 || !absl::SimpleAtoi(parts[0], &hours) ||
        !absl::SimpleAtoi(parts[1], &minutes) || hours < 0 || minutes < 0 || minutes > 59 ||
        hours * 60 + minutes == 0 || !IsSbatchWord(args.time, ":")) {
      return BadFlag("--time", absl::StrCat("\"", SanitizeLine(args.time, 40),
                                            "\": HH:MM, e.g. 23:30 or 72:00"));
    }
    if (hours * 60 + minutes <= kSignalBeforeEndS / 60) {
      return BadFlag("--time", absl::StrCat("longer than the ", kSignalBeforeEndS,
                                            " s the workers get to hand their runs back"));
    }
  }
  for (const auto& [flag, value, extra] :
       {std::tuple{"--partition", &args.partition, "_.,-"},
        std::tuple{"--account", &args.account, "_.-"}}) {
    if (!value->empty() && !IsSbatchWord(*value, extra)) {
      return BadFlag(flag, "letters, digits and _ . - (a partition list: with ,)");
    }
  }
  if (!IsSbatchWord(args.job_name, "_.-")) {
    return BadFlag("--job-name", "letters, digits and _ . - only");
  }
  if (!IsSbatchWord(args.output, "_.-/%")) {
    return BadFlag("--output", "a path of letters, digits and _ . - / % (sbatch's %j, %N)");
  }
  RETURN_IF_ERROR(CheckPath("--cache", args.cache));
  if (!args.worker_binary.empty()) RETURN_IF_ERROR(CheckPath("--worker-binary", args.worker_binary));
  if (!args.worker_token_file.empty()) {
    RETURN_IF_ERROR(CheckPath("--worker-token-file", args.worker_token_file));
    if (!fs::path(args.worker_token_file).is_absolute()) {
      return BadFlag("--worker-token-file",
                     "an absolute path, readable by the job on every node");
    }
  }
  return absl::OkStatus();
}

std::string SlurmScript(const SlurmSubmitArgs& args) {
  std::string s = absl::StrCat(
      "#!/bin/bash\n"
      "# smallem-worker on ", args.nodes, " node", args.nodes == 1 ? "" : "s",
      ": one worker per node, offering all of the node's devices.\n"
      "# Written by `smallemctl slurm submit` (docs/cluster.md); "
      "contrib/slurm/smallem-worker.sbatch\n"
      "# is the same script, to adapt by hand.\n",
      "#SBATCH --job-name=", args.job_name, "\n",
      "#SBATCH --nodes=", args.nodes, "\n",
      "#SBATCH --ntasks-per-node=1\n");
  if (args.cpus_per_node > 0) absl::StrAppend(&s, "#SBATCH --cpus-per-task=", args.cpus_per_node, "\n");
  if (args.gpus_per_node > 0) absl::StrAppend(&s, "#SBATCH --gpus-per-node=", args.gpus_per_node, "\n");
  if (!args.partition.empty()) absl::StrAppend(&s, "#SBATCH --partition=", args.partition, "\n");
  if (!args.account.empty()) absl::StrAppend(&s, "#SBATCH --account=", args.account, "\n");
  if (!args.time.empty()) absl::StrAppend(&s, "#SBATCH --time=", args.time, ":00\n");
  absl::StrAppend(
      &s, "#SBATCH --output=", args.output, "\n",
      "# At the time limit Slurm sends SIGTERM ", kSignalBeforeEndS,
      " s early (on scancel, at once), then SIGKILL\n"
      "# after its KillWait. On SIGTERM each worker stops leasing, hands its runs back\n"
      "# to the queue (they are requeued at once, charged to nothing) and exits.\n",
      "#SBATCH --signal=TERM@", kSignalBeforeEndS, "\n",
      "\nset -euo pipefail\n");
  if (!args.worker_token_file.empty()) {
    absl::StrAppend(&s, "# The worker token: read by each worker from this file.\n");
  } else {
    absl::StrAppend(&s, "# The worker token, if the coordinator wants one: $", kWorkerTokenEnv,
                    " in the job's\n# environment (sbatch exports the submitting shell's).\n");
  }
  const std::string binary =
      args.worker_binary.empty() ? DefaultWorkerBinary() : args.worker_binary;
  absl::StrAppend(&s, "exec srun --ntasks-per-node=1 --kill-on-bad-exit=0 \\\n  ",
                  ShellWord(binary), " --coordinator ", args.coordinator,
                  " --devices all \\\n  --cache ", ShellWord(args.cache), " --threads ",
                  args.threads);
  if (!args.worker_token_file.empty()) {
    absl::StrAppend(&s, " --token-file ", ShellWord(args.worker_token_file));
  }
  absl::StrAppend(&s, "\n");
  return s;
}

int RunSlurmSubmit(SlurmSubmitArgs args) {
  if (absl::Status ok = CheckSlurmSubmitArgs(args); !ok.ok()) return ReportError(ok);
  const std::string script = SlurmScript(args);
  if (args.dry_run) {
    std::fputs(script.c_str(), stdout);
    return kExitOk;
  }
  // sbatch keeps its own copy of the script: a temporary file will do.
  const char* tmp = std::getenv("TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                   "/smallem-worker-XXXXXX.sbatch");
  const int fd = mkstemps(path.data(), 7);
  if (fd < 0) return ReportError(absl::InternalError(absl::StrCat("cannot create ", path)));
  close(fd);
  absl::Status written = WriteFileDurably(path, script);
  absl::StatusOr<ProgramResult> sbatch =
      written.ok() ? RunProgram({"sbatch", "--parsable", path})
                   : absl::StatusOr<ProgramResult>(written);
  unlink(path.c_str());
  if (!sbatch.ok()) {
    if (absl::IsNotFound(sbatch.status())) {
      return ReportError(absl::FailedPreconditionError(
          "sbatch not found: run this on a machine with Slurm's client commands (a login "
          "node), or print the script with --dry-run and submit it there"));
    }
    return ReportError(sbatch.status());
  }
  // --parsable prints "JOBID" or "JOBID;CLUSTER" as its last line.
  std::vector<std::string> lines =
      absl::StrSplit(std::string(absl::StripTrailingAsciiWhitespace(sbatch->output)), '\n');
  const std::string last = lines.empty() ? "" : lines.back();
  const std::string job_id = last.substr(0, last.find(';'));
  int64_t id = 0;
  if (sbatch->exit_code != 0 || !absl::SimpleAtoi(job_id, &id)) {
    return ReportError(absl::UnavailableError(absl::StrCat(
        "sbatch refused the job (exit ", sbatch->exit_code, "): ",
        SanitizeText(std::string(absl::StripAsciiWhitespace(sbatch->output)), 2000),
        "\n(see the script with --dry-run)")));
  }
  std::printf("%s\n", job_id.c_str());
  std::fprintf(stderr,
               "submitted Slurm job %s: %d worker%s for %s. Follow it with `squeue -j %s` "
               "and `smallemctl workers --coordinator %s`; stop it with `scancel %s` (its runs "
               "go back to the queue).\n",
               job_id.c_str(), args.nodes, args.nodes == 1 ? "" : "s",
               args.coordinator.c_str(), job_id.c_str(), args.coordinator.c_str(),
               job_id.c_str());
  return kExitOk;
}

void AddSlurmCommand(CLI::App& app, int* exit_code) {
  CLI::App* slurm = app.add_subcommand("slurm", "Workers on a Slurm cluster (docs/cluster.md).");
  slurm->require_subcommand(1);
  auto args = std::make_shared<SlurmSubmitArgs>();
  CLI::App* submit = slurm->add_subcommand(
      "submit",
      "Submit one Slurm job running a smallem-worker on each of its nodes; prints the job id.\n"
      "Example: smallemctl slurm submit --coordinator login1:7070 --nodes 4 "
      "--gpus-per-node 8 --time 24:00");
  submit->add_option("--coordinator", args->coordinator,
                     "Coordinator HOST:PORT, as the compute nodes reach it")
      ->required();
  submit->add_option("--nodes", args->nodes, "Nodes (one worker each)")->capture_default_str();
  submit->add_option("--partition", args->partition, "Partition (default: the cluster's)");
  submit->add_option("--gpus-per-node", args->gpus_per_node, "GPUs per node (0 = none asked)")
      ->capture_default_str();
  submit->add_option("--cpus-per-node", args->cpus_per_node,
                     "CPUs per node for the worker (0 = Slurm's default)");
  submit->add_option("--time", args->time, "Time limit, HH:MM (default: the partition's)");
  submit->add_option("--account", args->account, "Account to charge (default: yours)");
  submit->add_option("--job-name", args->job_name, "Job name")->capture_default_str();
  submit->add_option("--output", args->output, "The job's log file (sbatch --output)")
      ->capture_default_str();
  submit->add_option("--worker-binary", args->worker_binary,
                     "smallem-worker's path on the nodes (default: next to smallemctl)");
  submit->add_option("--cache", args->cache, "Each worker's cache directory on its node")
      ->capture_default_str();
  submit->add_option("--threads", args->threads, "CPU threads per run (0 = all)")
      ->capture_default_str();
  submit->add_option("--worker-token-file", args->worker_token_file,
                     "File holding the coordinator's worker token, absolute, readable on the\n"
                     "nodes (default: $SMALLEM_WORKER_TOKEN travels in the job's environment)");
  submit->add_flag("--dry-run", args->dry_run, "Print the sbatch script; submit nothing");
  submit->callback([args, exit_code] { *exit_code = RunSlurmSubmit(*args); });
}

}  // namespace smallem::cli
