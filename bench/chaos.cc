#include "bench/chaos.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "corpus/dataset.h"
#include "engine/train/resume.h"
#include "nlohmann/json.hpp"
#include "server/store/sqlite.h"
#include "runspec/run_result.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using Steady = std::chrono::steady_clock;

double Since(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

// A few KB of varied English-like text in six documents (the tests' tiny
// corpus), prepared as a dataset of vocabulary 300.
absl::Status PrepareChaosDataset(const std::string& dir, const std::string& out) {
  static const char* kWords[] = {"the", "model", "learns", "a", "small", "language", "of",
                                 "words", "and", "numbers", "while", "noise", "hides",
                                 "signal", "in", "every", "seed", "step", "loss", "falls"};
  std::filesystem::create_directories(dir);
  PrepareOptions options;
  uint32_t state = 12345;
  for (int d = 0; d < 6; ++d) {
    std::string text;
    while (text.size() < 1200) {
      for (int w = 0; w < 8; ++w) {
        state = state * 1103515245u + 12345u;
        absl::StrAppend(&text, kWords[(state >> 16) % 20], w == 7 ? ".\n" : " ");
      }
    }
    const std::string path = absl::StrCat(dir, "/doc", d, ".txt");
    RETURN_IF_ERROR(WriteFileDurably(path, text));
    options.files.push_back(path);
  }
  options.vocab = 300;
  options.out_dir = out;
  options.val_fraction = 0.34;
  return PrepareDataset(options);
}

std::string GridYaml(const ChaosOptions& o, const std::string& data) {
  std::string yaml = absl::StrCat(
      "name: chaos\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4, checkpoint_minutes: ", o.checkpoint_minutes, "}\nbudget: {steps: ",
      o.steps, "}\nseeds: [");
  for (int s = 1; s <= o.seeds; ++s) absl::StrAppend(&yaml, s == 1 ? "" : ", ", s);
  absl::StrAppend(&yaml, "]\nbaseline: v0\nvariants:\n");
  for (int v = 0; v < o.variants; ++v) {
    absl::StrAppend(&yaml, "  v", v, ": {lr: ", 0.001 * (v + 1), "}\n");
  }
  return yaml;
}

// The processes under test, started and restarted on the same address,
// ids and caches.
class Cluster {
 public:
  explicit Cluster(const ChaosOptions& o) : o_(o) {}

  absl::Status StartCoordinator() {
    ASSIGN_OR_RETURN(coordinator_,
                     ChildProcess::Spawn(Bin("server/smallem-coordinator"),
                                         {"--db", Db(), "--lease-ms", std::to_string(o_.lease_ms),
                                          "--listen", address_, "--log-level", "info"}));
    // The coordinator logs where it listens once the port is bound.
    const Steady::time_point start = Steady::now();
    while (Since(start) < 60) {
      std::vector<std::string> lines;
      if (!coordinator_->Poll(100, &lines)) break;
      for (const std::string& line : lines) {
        const size_t at = line.find("listening on ");
        if (at == std::string::npos) continue;
        const size_t begin = at + 13;
        address_ = line.substr(begin, line.find(' ', begin) - begin);
        return absl::OkStatus();
      }
    }
    return absl::InternalError(absl::StrCat("smallem-coordinator did not start: ",
                                            coordinator_->last_stderr_line()));
  }

  absl::Status StartWorker(int i) {
    const std::string id = absl::StrCat("chaos-w", i);
    ASSIGN_OR_RETURN(workers_[i],
                     ChildProcess::Spawn(Bin("worker/smallem-worker"),
                                         {"--coordinator", address_, "--devices", "cpu", "--cache",
                                          Join(absl::StrCat("cache-", i)), "--id", id,
                                          "--threads", "1", "--log-level", "warn"}));
    return absl::OkStatus();
  }

  void KillCoordinator() {
    coordinator_->Kill();
    coordinator_->Wait();
  }
  void KillWorker(int i) {
    workers_[i]->Kill();
    workers_[i]->Wait();
  }
  // Reads the processes' output so that no pipe fills.
  void Drain() {
    std::vector<std::string> lines;
    if (coordinator_) coordinator_->Poll(0, &lines);
    for (auto& [i, w] : workers_) w->Poll(0, &lines);
  }
  void StopAll() {
    for (auto& [i, w] : workers_) KillWorker(i);
    if (coordinator_) KillCoordinator();
  }

  std::string Bin(const std::string& name) const { return o_.bin_dir + "/" + name; }
  std::string Join(const std::string& name) const { return o_.work_dir + "/" + name; }
  std::string Db() const { return Join("chaos.db"); }
  const std::string& address() const { return address_; }

 private:
  const ChaosOptions& o_;
  std::string address_ = "127.0.0.1:0";
  std::unique_ptr<ChildProcess> coordinator_;
  std::map<int, std::unique_ptr<ChildProcess>> workers_;
};

// Runs a program to its end; its exit and stdout.
ChildExit RunToEnd(const std::string& program, const std::vector<std::string>& args,
                   std::string* out, std::string* err) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Spawn(program, args);
  if (!p.ok()) {
    *err = std::string(p.status().message());
    return ChildExit{.exit_code = 127};
  }
  std::vector<std::string> lines;
  while ((*p)->Poll(100, &lines)) {
  }
  const ChildExit exit = (*p)->Wait();
  for (const std::string& line : lines) absl::StrAppend(out, line, "\n");
  *err = (*p)->last_stderr_line();
  return exit;
}

// Whether every run has ended, as `smallemctl status chaos` says: its first
// line counts "S/N runs done" and names running and queued runs (false
// while the coordinator is down or restarting).
bool AllEnded(const Cluster& c) {
  std::string out, err;
  const ChildExit exit = RunToEnd(c.Bin("cli/smallemctl"),
                                  {"status", "chaos", "--coordinator", c.address()}, &out, &err);
  const std::string first = out.substr(0, out.find('\n'));
  return exit.ok() && first.find(" runs done") != std::string::npos &&
         first.find(" running") == std::string::npos &&
         first.find(" queued") == std::string::npos;
}

// How many checkpoints the coordinator holds, as `smallemctl workers` says
// ("checkpoints: N held, ..."); -1 while it cannot be asked.
int CheckpointsHeld(const Cluster& c) {
  std::string out, err;
  const ChildExit exit = RunToEnd(c.Bin("cli/smallemctl"),
                                  {"workers", "--coordinator", c.address()}, &out, &err);
  const size_t at = out.find("checkpoints: ");
  if (!exit.ok() || at == std::string::npos) return -1;
  return std::atoi(out.c_str() + at + 13);
}

// Result JSON without what timing decides, the resume count and the device
// name (the daemon writes its own name for it).
nlohmann::json Deterministic(nlohmann::json result) {
  result = DeterministicResult(std::move(result));
  result.erase(result_keys::kDevice);
  return result;
}

// The final checks, on the database once every process is down.
absl::Status Check(const ChaosOptions& o, const Cluster& c, ChaosReport& report) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(c.Db()));
  {
    ASSIGN_OR_RETURN(SqliteStatement s, db->Prepare("PRAGMA integrity_check"));
    ASSIGN_OR_RETURN(bool row, s.Step());
    report.integrity_ok = row && s.ColumnText(0) == "ok";
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     db->Prepare("SELECT count(*), coalesce(sum(status = 'succeeded'), 0), "
                                 "coalesce(sum(attempt), 0) FROM runs"));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      report.runs = static_cast<int>(s.ColumnInt(0));
      report.succeeded = static_cast<int>(s.ColumnInt(1));
      report.attempts = static_cast<int>(s.ColumnInt(2));
    }
  }
  std::vector<std::pair<int64_t, nlohmann::json>> resumed;
  {
    // results.run_id is its primary key: one row per run at most; the count
    // of distinct runs with a row is the count of results.
    ASSIGN_OR_RETURN(SqliteStatement s, db->Prepare("SELECT run_id, result_json FROM results"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      ++report.results;
      nlohmann::json result = nlohmann::json::parse(s.ColumnText(1), nullptr, false);
      const int64_t resumes = result.is_object() ? result.value(result_keys::kResumes, int64_t{0}) : 0;
      report.total_resumes += resumes;
      if (resumes > 0) {
        ++report.resumed_runs;
        resumed.emplace_back(s.ColumnInt(0), std::move(result));
      }
    }
  }
  if (resumed.empty()) return absl::OkStatus();
  // A clean run of the first resumed run's cell: its spec (the result's
  // config, whose data is the worker cache's copy of the dataset), trained
  // uninterrupted by a child with the same thread count.
  const auto& [run_id, result] = resumed.front();
  report.compared_run = run_id;
  const std::string spec_path = c.Join("clean-spec.json");
  RETURN_IF_ERROR(WriteFileDurably(spec_path, result.at(result_keys::kConfig).dump()));
  std::string out, err;
  const ChildExit exit =
      RunToEnd(c.Bin("worker/smallem-worker"),
               {"child", "--spec", spec_path, "--out", c.Join("clean"), "--threads", "1"}, &out,
               &err);
  if (!exit.ok()) return absl::InternalError(absl::StrCat("the clean run failed: ", err));
  ASSIGN_OR_RETURN(const std::string clean_text, ReadFile(c.Join("clean/result.json")));
  const nlohmann::json clean = nlohmann::json::parse(clean_text, nullptr, false);
  report.compared_equal = Deterministic(clean).dump() == Deterministic(result).dump();
  if (!report.compared_equal && o.verbose) {
    std::fprintf(stderr, "chaos: run %lld resumed:\n%s\nclean:\n%s\n",
                 static_cast<long long>(run_id), Deterministic(result).dump(2).c_str(),
                 Deterministic(clean).dump(2).c_str());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChaosReport> RunChaos(const ChaosOptions& o) {
  const Steady::time_point start = Steady::now();
  ChaosReport report;
  Cluster c(o);
  const std::string data = c.Join("data");
  RETURN_IF_ERROR(PrepareChaosDataset(c.Join("corpus"), data));
  RETURN_IF_ERROR(WriteFileDurably(c.Join("chaos.yaml"), GridYaml(o, data)));
  RETURN_IF_ERROR(c.StartCoordinator());
  for (int i = 0; i < o.workers; ++i) RETURN_IF_ERROR(c.StartWorker(i));
  {
    std::string out, err;
    const ChildExit submitted = RunToEnd(
        c.Bin("cli/smallemctl"),
        {"submit", c.Join("chaos.yaml"), "--coordinator", c.address()}, &out, &err);
    if (!submitted.ok()) return absl::InternalError(absl::StrCat("submit failed: ", err));
  }

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> gap(o.min_gap_s, o.max_gap_s);
  std::uniform_real_distribution<double> coin(0, 1);
  int kills = 0;
  while (true) {
    const Steady::time_point wait_start = Steady::now();
    const double wait_s = gap(rng);
    while (Since(wait_start) < wait_s) {
      c.Drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (Since(start) > o.timeout_s) {
      c.StopAll();
      return absl::DeadlineExceededError(absl::StrCat(
          "not every run finished within ", o.timeout_s, " s (", kills, " kills)"));
    }
    if (kills >= o.kills && AllEnded(c)) break;
    if (kills >= o.kills) continue;
    // The first kill, of a worker, waits until every worker's run holds a
    // checkpoint, so that at least one run is killed and resumed whatever
    // the schedule.
    if (kills == 0 && CheckpointsHeld(c) < o.workers) {
      // Runs that all end first leave nothing to kill: say so now rather
      // than wait for the timeout.
      if (AllEnded(c)) {
        c.StopAll();
        return absl::FailedPreconditionError(absl::StrCat(
            "every run ended before the first kill could hit one: runs of ", o.steps,
            " steps are too short on this machine; give more steps"));
      }
      continue;
    }
    // Kill one process and start it again at once.
    if (kills > 0 && coin(rng) < o.coordinator_share) {
      c.KillCoordinator();
      RETURN_IF_ERROR(c.StartCoordinator());
      ++report.coordinator_kills;
      if (o.verbose) std::fprintf(stderr, "chaos %.1f s: kill -9 coordinator\n", Since(start));
    } else {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(o.workers));
      c.KillWorker(i);
      RETURN_IF_ERROR(c.StartWorker(i));
      ++report.worker_kills;
      if (o.verbose) std::fprintf(stderr, "chaos %.1f s: kill -9 worker %d\n", Since(start), i);
    }
    ++kills;
  }
  c.StopAll();
  RETURN_IF_ERROR(Check(o, c, report));
  report.wall_seconds = Since(start);
  return report;
}

}  // namespace smallem
