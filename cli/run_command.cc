// `smallemctl run GRID`: the embedded default — a coordinator on 127.0.0.1
// (a free port) with its SQLite file in the working directory, local CPU
// workers (smallem-worker processes, which spawn their own training
// children), progress while it runs, the report at the end.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "cli/progress.h"
#include "cli/service_client.h"
#include "cli/service_commands.h"
#include "cli/status_view.h"
#include "nlohmann/json.hpp"
#include "rpc/auth.h"
#include "runspec/grid.h"
#include "server/service/coordinator.h"
#include "spdlog/spdlog.h"
#include "runspec/run_result.h"

extern "C" char** environ;

namespace smallem {
namespace {

namespace fs = std::filesystem;

// The command that runs this grid again on the same database, cache and
// workers: what resumes it (or retries its failed runs).
std::string SameRunCommand(const cli::RunLocalArgs& args) {
  const cli::RunLocalArgs defaults;
  std::string command = absl::StrCat("smallemctl run ", ShellWord(args.grid));
  if (args.db != defaults.db) absl::StrAppend(&command, " --db ", ShellWord(args.db));
  if (args.cache != defaults.cache) absl::StrAppend(&command, " --cache ", ShellWord(args.cache));
  if (args.devices != defaults.devices) {
    absl::StrAppend(&command, " --devices ", ShellWord(args.devices));
  }
  if (args.workers != defaults.workers) absl::StrAppend(&command, " --workers ", args.workers);
  if (args.threads != defaults.threads) absl::StrAppend(&command, " --threads ", args.threads);
  if (!args.worker_binary.empty()) {
    absl::StrAppend(&command, " --worker-binary ", ShellWord(args.worker_binary));
  }
  if (!args.http.empty()) absl::StrAppend(&command, " --http ", ShellWord(args.http));
  return command;
}

// Whether the grid file compares at equal time: a reference curve or a
// minutes budget.
absl::StatusOr<bool> ComparesAtEqualTime(const std::string& grid_path) {
  ASSIGN_OR_RETURN(std::string yaml, ReadFile(grid_path));
  ASSIGN_OR_RETURN(Grid grid, ParseGrid(yaml, grid_path));
  return grid.reference.has_value() || grid.budget.minutes.has_value();
}

// How many local workers, with how many threads each, and why, when the
// user left either to us (0).
struct WorkerPlan {
  int workers = 1;
  int threads = 1;
  std::string why;  // "" when the user chose the workers
};

// `timed`: the grid compares at equal time (a reference curve or a minutes
// budget), so a run's training seconds must not depend on what runs beside
// it: one run at a time, on every core. Otherwise the runs are independent
// and one single-thread run per core finishes the grid a little sooner and
// never spins at an OpenMP barrier, which on a loaded machine costs a
// multi-thread run most of its speed (measured: docs/benchmarks.md § The
// demo's runs, § Threads).
WorkerPlan PlanWorkers(int workers, int threads, int cores, bool timed) {
  if (workers > 0) return {workers, threads > 0 ? threads : std::max(1, cores / workers), ""};
  if (timed) {
    return {1, threads > 0 ? threads : cores,
            "one run at a time: the grid compares at equal time, so no run shares the cores "
            "with another (--workers N to change)"};
  }
  const int per_run = threads > 0 ? threads : 1;
  return {std::max(1, cores / per_run), per_run,
          "one run per core: the runs are independent and no comparison is timed "
          "(--workers 1 for one run at a time)"};
}

// `run --devices`: "cpu", or a list of GPUs ("cuda:0,cuda:1") that one
// local worker trains on, a run per GPU at a time (the worker checks that
// they exist). InvalidArgument for anything else.
absl::StatusOr<std::vector<std::string>> ParseRunDevices(const std::string& flag) {
  if (flag == "cpu") return std::vector<std::string>{};
  std::vector<std::string> gpus = absl::StrSplit(flag, ',');
  for (const std::string& gpu : gpus) {
    int index = 0;
    if (!gpu.starts_with("cuda:") || !absl::SimpleAtoi(gpu.substr(5), &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices ", flag, ": expected cpu, or GPUs such as cuda:0 or cuda:0,cuda:1"));
    }
  }
  return gpus;
}

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

// $SMALLEM_WORKER, then smallem-worker next to smallemctl, then the build
// tree's layout (cli/smallemctl beside worker/smallem-worker).
absl::StatusOr<std::string> FindWorkerBinary(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("SMALLEM_WORKER"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate : {self.parent_path() / "smallem-worker",
                                      self.parent_path().parent_path() / "worker" /
                                          "smallem-worker"}) {
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return absl::NotFoundError(
      "cannot find the smallem-worker binary next to smallemctl; build it "
      "(`cmake --build build --target smallem-worker`) or set $SMALLEM_WORKER");
}

// The local smallem-worker processes of one `run`. Each is started in its
// own process group (a Ctrl-C is smallemctl's to handle: it stops them and
// prints how to resume) with --parent-pid, so the kernel kills it — and its
// training child with it — if smallemctl dies. Their output is smallemctl's.
//
// Not thread-safe: the thread that starts them stops them (the kernel ties
// --parent-pid's death signal to it).
class LocalWorkers {
 public:
  LocalWorkers() = default;
  ~LocalWorkers() { Stop(); }
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  // Starts `binary` with `args` (argv[1..]). Subprocess::Start's errors,
  // naming the binary, when it cannot be started.
  absl::Status Start(const std::string& binary, const std::vector<std::string>& args);

  // Stops every worker still running: the runs they hold are given back at
  // once (SIGTERM, which stops a worker and releases its runs: see RunWorker),
  // and each is waited for — killed when it outlasts kStopGrace.
  void Stop();

  // True when every worker has exited by itself; `how` then says how the
  // last one ended.
  bool AllExited(std::string* how);

 private:
  static constexpr std::chrono::seconds kStopGrace{30};

  std::vector<std::unique_ptr<Subprocess>> running_;  // started, not yet reaped
};

// How a process ended, for people.
std::string DescribeExit(const ProcessExit& exit) {
  if (exit.signal != 0) return absl::StrCat("killed by signal ", exit.signal);
  return absl::StrCat("exit code ", exit.exit_code);
}

absl::Status LocalWorkers::Start(const std::string& binary,
                                 const std::vector<std::string>& args) {
  SubprocessOptions options;
  options.argv = {binary};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.own_process_group = true;
  // This environment, less what points at a remote coordinator: the embedded
  // one is plaintext and open (docs/security.md).
  const std::string token_entry = absl::StrCat(kWorkerTokenEnv, "=");
  const std::string tls_ca_entry = absl::StrCat(kTlsCaEnv, "=");
  options.env.emplace();
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view e(*entry);
    if (e.starts_with(token_entry) || e.starts_with(tls_ca_entry)) continue;
    options.env->emplace_back(e);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> worker, Subprocess::Start(options));
  running_.push_back(std::move(worker));
  return absl::OkStatus();
}

void LocalWorkers::Stop() {
  for (const auto& worker : running_) {
    worker->Kill(SIGTERM);
  }
  const auto give_up = std::chrono::steady_clock::now() + kStopGrace;
  for (const auto& worker : running_) {
    while (!worker->Poll()) {
      if (std::chrono::steady_clock::now() > give_up) {
        std::fprintf(stderr, "smallem-worker %d did not stop within %llds; killing it\n",
                     worker->pid(), static_cast<long long>(kStopGrace.count()));
        worker->Kill(SIGKILL);
        worker->Wait();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  running_.clear();
}

bool LocalWorkers::AllExited(std::string* how) {
  for (auto it = running_.begin(); it != running_.end();) {
    if (std::optional<ProcessExit> exit = (*it)->Poll()) {
      *how = DescribeExit(*exit);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return running_.empty();
}

// "✓ run 3 (rope, seed 1): 1.2345 nats/byte in 45s" for a finished run.
std::string FinishedLine(const v1::Run& run) {
  std::string line = absl::StrCat(run.status() == v1::RUN_STATUS_SUCCEEDED  ? "done"
                                  : run.status() == v1::RUN_STATUS_DIVERGED ? "DIVERGED"
                                                                            : "FAILED",
                                  "  run ", run.run_id(), " (", run.variant(), ", seed ",
                                  run.seed(), ")");
  if (run.status() == v1::RUN_STATUS_SUCCEEDED) {
    const absl::StatusOr<RunResult> r =
        RunResult::FromStoredJson(nlohmann::json::parse(run.result_json(), nullptr, false));
    if (r.ok()) {
      absl::StrAppend(&line, absl::StrFormat(": %.4f nats/byte", r->val_nats_per_byte));
      if (r->train_seconds) absl::StrAppend(&line, " in ", FormatDuration(*r->train_seconds));
    }
  } else if (run.status() == v1::RUN_STATUS_DIVERGED) {
    absl::StrAppend(&line, ": ", DivergedText(run));
  } else {
    absl::StrAppend(&line, ": ", run.last_error());
  }
  return line;
}

}  // namespace

}  // namespace smallem

namespace smallem::cli {

int RunLocal(const RunLocalArgs& args) {
  absl::StatusOr<v1::ReportRequest> report_request = MakeReportRequest("both", args.format, 0);
  if (!report_request.ok()) return ReportError(report_request.status());
  if (args.workers < 0) {
    return ReportError(absl::InvalidArgumentError("--workers: 0 (auto) or more"));
  }
  absl::StatusOr<std::vector<std::string>> gpus = ParseRunDevices(args.devices);
  if (!gpus.ok()) return ReportError(gpus.status());
  absl::StatusOr<std::string> worker_binary = FindWorkerBinary(args.worker_binary);
  if (!worker_binary.ok()) return ReportError(worker_binary.status());

  // The service logs only what needs attention; progress is ours to show.
  spdlog::set_level(spdlog::level::warn);
  CoordinatorOptions coordinator_options;
  coordinator_options.listen = "127.0.0.1:0";
  coordinator_options.db_path = args.db;
  coordinator_options.queue.heartbeat_interval_ms = 500;
  coordinator_options.http_listen = args.http;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      Coordinator::Start(coordinator_options);
  if (!coordinator.ok()) return ReportError(coordinator.status());
  if (!args.http.empty()) {
    std::printf("dashboard: %s (while this command runs)\n",
                (*coordinator)->dashboard_url().c_str());
    std::fflush(stdout);
  }

  // The embedded coordinator is plaintext and open, on loopback for the
  // length of this command (docs/security.md): no token is sent, whatever
  // the environment holds for a remote coordinator.
  ServiceClient client((*coordinator)->address(), absl::Seconds(60), ChannelSecurity{});
  std::string budget_note;
  absl::StatusOr<v1::SubmitResponse> submitted = client.SubmitGridFile(args.grid, 0, &budget_note);
  if (!submitted.ok()) return ReportError(submitted.status());
  if (!budget_note.empty()) std::printf("%s\n", budget_note.c_str());
  const std::string name = submitted->experiment_name();
  // Submitted, so the file parses.
  absl::StatusOr<bool> timed = ComparesAtEqualTime(args.grid);
  if (!timed.ok()) return ReportError(timed.status());
  // The unchanged runs split into finished and still to run: what is queued
  // or leased now, less what this submission just queued.
  absl::StatusOr<v1::GetExperimentResponse> now = client.GetExperiment(name);
  if (!now.ok()) return ReportError(now.status());
  const v1::RunCounts& counts = now->experiment().counts();
  const int pending =
      std::clamp(counts.queued() + counts.leased() - submitted->runs_added() -
                     submitted->runs_reissued(),
                 0, submitted->runs_unchanged());
  std::printf("%s: %s (%d new, %d reissued, %d already done, %d pending) — database %s\n",
              name.c_str(), CountedNoun(submitted->runs_total(), "run", "runs").c_str(),
              submitted->runs_added(),
              submitted->runs_reissued(), submitted->runs_unchanged() - pending, pending,
              args.db.c_str());

  // Handled from here on: a Ctrl-C stops the workers and says how to resume.
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const WorkerPlan plan =
      gpus->empty() ? PlanWorkers(args.workers, args.threads, hardware, *timed)
                    : WorkerPlan{1, args.threads > 0 ? args.threads : hardware, ""};
  const int threads = plan.threads;
  if (gpus->empty()) {
    std::printf("workers: %d × %d thread%s%s%s\n", plan.workers, threads,
                threads == 1 ? "" : "s", plan.why.empty() ? "" : " — ", plan.why.c_str());
  } else {
    std::printf("workers: 1, training on %s (a run per GPU at a time)\n", args.devices.c_str());
  }
  std::fflush(stdout);
  LocalWorkers workers;
  for (int i = 0; i < plan.workers; ++i) {
    absl::Status started = workers.Start(
        *worker_binary,
        {"--coordinator", (*coordinator)->address(), "--devices", args.devices, "--cache", args.cache,
         "--id", absl::StrCat("local-", getpid(), "-", i + 1), "--threads",
         absl::StrCat(threads), "--log-level", "warn", "--parent-pid", absl::StrCat(getpid())});
    if (!started.ok()) return ReportError(started);
  }

  ProgressLine progress(stderr, /*plain_interval_s=*/10.0);
  std::set<int64_t> reported;
  bool first_poll = true;
  v1::Experiment last;
  absl::Status workers_lost;
  while (!g_interrupted.load()) {
    absl::StatusOr<v1::GetExperimentResponse> e = client.GetExperiment(name);
    if (!e.ok()) {
      progress.Finish();
      ReportError(e.status());
      break;
    }
    last = e->experiment();
    std::string running;
    for (const v1::Run& run : e->runs()) {
      const bool finished = run.status() == v1::RUN_STATUS_SUCCEEDED ||
                            run.status() == v1::RUN_STATUS_FAILED ||
                            run.status() == v1::RUN_STATUS_DIVERGED;
      // Runs finished by an earlier invocation are not announced again.
      if (finished && reported.insert(run.run_id()).second && !first_poll) {
        progress.Finish();
        std::fprintf(stderr, "%s\n", FinishedLine(run).c_str());
      }
      if (run.status() == v1::RUN_STATUS_LEASED) {
        absl::StrAppend(&running, " | ", run.variant(), " s", run.seed(), " ");
        if (run.progress().total_steps() > 0) {
          absl::StrAppend(&running, run.progress().step(), "/", run.progress().total_steps());
        } else {
          absl::StrAppend(&running, "starting");  // no progress point yet
        }
        if (run.progress().loss() > 0) {
          absl::StrAppend(&running, absl::StrFormat(" loss %.3f", run.progress().loss()));
        }
      }
    }
    first_poll = false;
    const v1::RunCounts& c = last.counts();
    if (c.queued() == 0 && c.leased() == 0) break;
    if (std::string how; workers.AllExited(&how)) {
      progress.Finish();
      workers_lost = absl::InternalError(absl::StrCat(
          "every smallem-worker has exited (the last: ", how,
          "; its messages are above); finished runs are kept in ", args.db));
      break;
    }
    progress.Update(FormatExperimentLine(last) + running);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  progress.Finish();

  // The runs are over (or we were interrupted): workers stop, children die,
  // and the runs they held are queued again at once.
  workers.Stop();
  if (!workers_lost.ok()) {
    (*coordinator)->Shutdown();
    return ReportError(workers_lost);
  }

  if (g_interrupted.load()) {
    std::fprintf(stderr,
                 "interrupted; finished runs are kept in %s — run `%s` again to resume\n",
                 args.db.c_str(), SameRunCommand(args).c_str());
    (*coordinator)->Shutdown();
    return 130;
  }
  absl::StatusOr<v1::ReportResponse> report = client.Report(*report_request, name);
  if (!report.ok()) return ReportError(report.status());
  std::printf("\n%s", report->text().c_str());
  (*coordinator)->Shutdown();
  // The database stays: the report and its figure are one command away, with
  // no coordinator to start. Beside a table for a person; on stderr when
  // stdout is CSV or JSON for a program.
  const std::string reread =
      absl::StrCat("smallemctl report ", ShellWord(name), " --db ", ShellWord(args.db));
  std::fprintf(args.format == "table" ? stdout : stderr,
               "\nthis report again (no server needed): %s\n"
               "its figure:                           %s --plot %s\n",
               reread.c_str(), reread.c_str(), ShellWord(name + ".svg").c_str());
  if (last.counts().failed() > 0) {
    std::fprintf(stderr,
                 "%d run%s failed (see the output above); `%s` again retries them\n",
                 last.counts().failed(), last.counts().failed() == 1 ? "" : "s",
                 SameRunCommand(args).c_str());
    return 1;
  }
  return 0;
}

}  // namespace smallem::cli
