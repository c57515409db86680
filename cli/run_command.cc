// `smallemctl run GRID`: the embedded default — a coordinator on 127.0.0.1
// (a free port) with its SQLite file in the working directory, local CPU
// workers spawning smallem-worker children, progress while it runs, the
// report at the end.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_codes.h"
#include "cli/progress.h"
#include "cli/service_client.h"
#include "cli/service_commands.h"
#include "cli/status_view.h"
#include "nlohmann/json.hpp"
#include "server/service/coordinator.h"
#include "spdlog/spdlog.h"
#include "worker/daemon.h"
#include "worker/devices.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

// Prints the error and returns its exit code (base/exit_codes.h).
int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

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

// "✓ run 3 (rope, seed 1): 1.2345 nats/byte in 45s" for a finished run.
std::string FinishedLine(const v1::Run& run) {
  std::string line = absl::StrCat(run.status() == v1::RUN_STATUS_SUCCEEDED ? "done" : "FAILED",
                                  "  run ", run.run_id(), " (", run.variant(), ", seed ",
                                  run.seed(), ")");
  if (run.status() == v1::RUN_STATUS_SUCCEEDED) {
    nlohmann::json r = nlohmann::json::parse(run.result_json(), nullptr, false);
    if (r.is_object() && r.contains("val_nats_per_byte") && r["val_nats_per_byte"].is_number()) {
      absl::StrAppend(&line, absl::StrFormat(": %.4f nats/byte",
                                             r["val_nats_per_byte"].get<double>()));
    }
    if (r.is_object() && r.contains("train_seconds") && r["train_seconds"].is_number()) {
      absl::StrAppend(&line, " in ", FormatDuration(r["train_seconds"].get<double>()));
    }
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
  if (!report_request.ok()) return Fail(report_request.status());
  if (args.workers < 1) return Fail(absl::InvalidArgumentError("--workers: at least 1"));
  absl::StatusOr<std::string> worker_binary = FindWorkerBinary(args.worker_binary);
  if (!worker_binary.ok()) return Fail(worker_binary.status());
  absl::StatusOr<std::vector<DeviceInfo>> cpu = ParseDevices("cpu");
  if (!cpu.ok()) return Fail(cpu.status());

  // The service logs only what needs attention; progress is ours to show.
  spdlog::set_level(spdlog::level::warn);
  CoordinatorOptions coordinator_options;
  coordinator_options.listen = "127.0.0.1:0";
  coordinator_options.db_path = args.db;
  coordinator_options.queue.heartbeat_interval_ms = 500;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      Coordinator::Start(coordinator_options);
  if (!coordinator.ok()) return Fail(coordinator.status());

  // The embedded coordinator is plaintext and open, on loopback for the
  // length of this command (docs/security.md): no token is sent, whatever
  // the environment holds for a remote coordinator.
  ServiceClient client((*coordinator)->address(), /*deadline_s=*/60, ChannelSecurity{});
  absl::StatusOr<v1::SubmitResponse> submitted = client.SubmitGridFile(args.grid, 0);
  if (!submitted.ok()) return Fail(submitted.status());
  const std::string name = submitted->experiment_name();
  std::printf("%s: %d runs (%d new, %d reissued, %d already done or pending) — database %s\n",
              name.c_str(), submitted->runs_total(), submitted->runs_added(),
              submitted->runs_reissued(), submitted->runs_unchanged(), args.db.c_str());

  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::unique_ptr<WorkerDaemon>> workers;
  std::vector<std::thread> worker_threads;
  for (int i = 0; i < args.workers; ++i) {
    WorkerOptions options;
    options.coordinator = (*coordinator)->address();
    options.devices = *cpu;
    options.cache_dir = args.cache;
    options.child_program = *worker_binary;
    options.worker_id = absl::StrCat("local-", getpid(), "-", i + 1);
    options.child_threads = args.threads > 0 ? args.threads : std::max(1, hardware / args.workers);
    workers.push_back(std::make_unique<WorkerDaemon>(options));
    worker_threads.emplace_back([w = workers.back().get()] { w->Run().IgnoreError(); });
  }

  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  ProgressLine progress(stderr, /*plain_interval_s=*/10.0);
  std::set<int64_t> reported;
  bool first_poll = true;
  v1::Experiment last;
  while (!g_interrupted.load()) {
    absl::StatusOr<v1::GetExperimentResponse> e = client.GetExperiment(name);
    if (!e.ok()) {
      progress.Finish();
      Fail(e.status());
      break;
    }
    last = e->experiment();
    std::string running;
    for (const v1::Run& run : e->runs()) {
      const bool finished = run.status() == v1::RUN_STATUS_SUCCEEDED ||
                            run.status() == v1::RUN_STATUS_FAILED;
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
    progress.Update(FormatExperimentLine(last) + running);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  progress.Finish();

  // The runs are over (or we were interrupted): workers stop, children die.
  for (auto& w : workers) w->Stop();
  for (std::thread& t : worker_threads) t.join();

  if (g_interrupted.load()) {
    std::fprintf(stderr,
                 "interrupted; finished runs are kept in %s — run `smallemctl run %s` again to "
                 "resume\n",
                 args.db.c_str(), args.grid.c_str());
    (*coordinator)->Shutdown();
    return 130;
  }
  absl::StatusOr<v1::ReportResponse> report = client.Report(*report_request, name);
  if (!report.ok()) return Fail(report.status());
  std::printf("\n%s", report->text().c_str());
  (*coordinator)->Shutdown();
  if (last.counts().failed() > 0) {
    std::fprintf(stderr,
                 "%d run%s failed (see `smallemctl run %s` output above); running the same "
                 "command again retries them\n",
                 last.counts().failed(), last.counts().failed() == 1 ? "" : "s",
                 args.grid.c_str());
    return 1;
  }
  return 0;
}

}  // namespace smallem::cli
