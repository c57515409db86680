// `smallemctl slurm submit`: starts smallem-worker daemons as one Slurm job —
// one worker per node (srun), each offering all the node's devices — that
// drain cleanly when Slurm ends the job: `--signal` makes Slurm send SIGTERM
// kSignalBeforeEndS before the time limit (and scancel sends it at once);
// the worker then releases its runs back to the queue and exits
// (worker/daemon.h) well before Slurm's SIGKILL.
//
// The worker token never appears on a command line or in the script: the
// script names a token file (--worker-token-file, readable on the nodes), or
// the token travels in the job's environment ($SMALLEM_WORKER_TOKEN in the
// submitting shell, which sbatch exports to the job).
//
// contrib/slurm/smallem-worker.sbatch is the same script for sites that
// write their own.
#ifndef SMALLEM_CLI_SLURM_COMMAND_H_
#define SMALLEM_CLI_SLURM_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}  // namespace CLI

namespace smallem::cli {

// Seconds before the time limit at which Slurm sends the workers SIGTERM
// (`#SBATCH --signal=TERM@120`; Slurm may send it up to a minute earlier).
inline constexpr int kSignalBeforeEndS = 120;

struct SlurmSubmitArgs {
  std::string coordinator;    // HOST:PORT the workers reach (required)
  int nodes = 1;              // one worker per node
  std::string partition;      // "" = the cluster's default
  int gpus_per_node = 0;      // 0 = ask for none (CPU workers, or a site that gives them anyway)
  int cpus_per_node = 0;      // CPUs for the worker on each node; 0 = Slurm's default
  std::string time;           // HH:MM; "" = the partition's default
  std::string account;        // "" = the user's default
  std::string job_name = "smallem-worker";
  std::string output = "smallem-worker-%j.out";  // sbatch --output, on the submitting side's cwd
  std::string worker_binary;  // path on the nodes; "" = smallem-worker next to smallemctl
  std::string cache = "/tmp/smallem-cache";  // the worker's --cache on each node
  int threads = 0;            // the worker's --threads (CPU threads per job; 0 = all)
  std::string worker_token_file;  // path on the nodes; "" = $SMALLEM_WORKER_TOKEN, if set
  bool dry_run = false;       // print the script instead of submitting it
};

// The sbatch script for `args` (after CheckSlurmSubmitArgs). The token file
// is named, never read; a token in the environment is not mentioned.
std::string SlurmScript(const SlurmSubmitArgs& args);

// InvalidArgument naming the flag for a bad coordinator address, node or
// GPU count, time or name.
absl::Status CheckSlurmSubmitArgs(const SlurmSubmitArgs& args);

// Prints the script (--dry-run) or submits it with `sbatch --parsable` and
// prints the job id and the commands to follow it. Returns the exit code:
// 2 for bad flags, 1 when sbatch is missing or refuses the job.
int RunSlurmSubmit(SlurmSubmitArgs args);

// Adds `slurm` (and its verb `submit`) to smallemctl; the verb's callback
// stores its exit code in *exit_code.
void AddSlurmCommand(CLI::App& app, int* exit_code);

}  // namespace smallem::cli

#endif  // SMALLEM_CLI_SLURM_COMMAND_H_
