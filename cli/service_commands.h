// The service verbs of smallemctl: submit, status, watch, report, cancel,
// retry, delete, workers — clients of a coordinator — and run, which embeds a
// coordinator and local workers. Flags are parsed in cli/main.cc; each verb
// takes a plain options struct and returns the process exit code: 0 success,
// 1 failure (the message on stderr says what to do next), 2 bad input.
// (Namespace cli: `RunStatus` the verb is not smallem::RunStatus the enum.)
#ifndef SMALLEM_CLI_SERVICE_COMMANDS_H_
#define SMALLEM_CLI_SERVICE_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace smallem::cli {

struct ServiceArgs {
  std::string coordinator;  // HOST:PORT; "" = $SMALLEM_COORDINATOR or 127.0.0.1:7070
  int64_t deadline_s = 30;  // per call
  std::string token_file;   // the client token's file; "" = $SMALLEM_CLIENT_TOKEN, else none
  std::string tls_ca;       // PEM root certificate; "" = $SMALLEM_TLS_CA, else plaintext
  // A database to read instead, opened read-only with no coordinator
  // (cli/session.h); "" = ask the coordinator. Only the verbs that read
  // (status, report, noise, export) offer it.
  std::string db;
};

struct SubmitArgs {
  ServiceArgs service;
  std::string grid;      // grid file path
  int retry_budget = 0;  // engine errors retried per run; 0 = the coordinator's default
};

struct StatusArgs {
  ServiceArgs service;
  std::string experiment;  // name or id; "" = every experiment, one line each
  bool all = false;        // list also the experiments whose every run was cancelled
};

struct DeleteArgs {
  ServiceArgs service;
  std::string experiment;  // name or id
  bool force = false;      // even while runs of it are leased
};

struct WatchArgs {
  ServiceArgs service;
  int64_t run_id = 0;
};

struct ReportArgs {
  ServiceArgs service;
  std::string experiment;      // name or id
  std::string at = "both";     // steps | time | both
  std::string format = "table";  // table | markdown | csv | json
  double noise_floor = 0;      // nats/byte; 0 = 0.002
  std::string plot;            // "" = no figure; FILE.svg = write the figure there
  bool noise_only = false;     // `smallemctl noise`: the noise section alone
};

struct CancelArgs {
  ServiceArgs service;
  std::string experiment;        // name or id ...
  std::vector<int64_t> run_ids;  // ... or runs
};

using RetryArgs = CancelArgs;

struct WorkersArgs {
  ServiceArgs service;
  bool all = false;  // every registered worker, not only those seen lately
};

struct BackupArgs {
  ServiceArgs service;
  std::string file;  // where the copy goes; must not exist
};

struct RunLocalArgs {
  std::string grid;               // grid file path
  std::string db = "smallem.db";  // SQLite file (in the working directory by default)
  std::string cache = ".cache/smallem";  // worker cache: datasets, job outputs
  std::string devices = "cpu";    // "cpu", or GPUs "cuda:0,cuda:1": one local worker, a run per GPU
  int workers = 0;                // local CPU workers (one job each); 0 = auto (PlanWorkers)
  int threads = 0;                // CPU threads per job; 0 = cores / workers
  std::string format = "table";   // report format at the end
  std::string worker_binary;      // "" = $SMALLEM_WORKER, next to smallemctl, or ../worker/
  std::string http;               // "" = no dashboard; HOST:PORT serves it while the grid runs
};

int RunSubmit(const SubmitArgs& args);
int RunStatus(const StatusArgs& args);
int RunWatch(const WatchArgs& args);
int RunReport(const ReportArgs& args);
int RunCancel(const CancelArgs& args);
int RunRetry(const RetryArgs& args);
// `smallemctl delete EXPERIMENT`: the experiment and everything recorded of
// it, gone (refused while runs of it are leased, unless args.force).
int RunDelete(const DeleteArgs& args);
int RunWorkers(const WorkersArgs& args);
// `smallemctl admin backup FILE`: a consistent copy of a running
// coordinator's database written to the new file FILE.
int RunBackup(const BackupArgs& args);
// `smallemctl run GRID`: an embedded coordinator on 127.0.0.1 (any free
// port) with the SQLite file `db`, `workers` local workers spawning
// smallem-worker children, progress while it runs, the report at the end.
// Running it again resumes: finished cells are not run twice.
int RunLocal(const RunLocalArgs& args);

}  // namespace smallem::cli

#endif  // SMALLEM_CLI_SERVICE_COMMANDS_H_
