// smallemctl as a user runs it: `run GRID` with its embedded coordinator and
// real worker processes (which spawn their training children), how it stops
// them, and the errors a person sees.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "corpus/dataset.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/store/sqlite_store.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

using testing::RunCtl;
using Output = testing::CtlOutput;

// Steps of a run long enough (~4 s here) to be interrupted mid-training.
constexpr int kLongSteps = 10'000;

// Live processes with an argument starting with `prefix` (a test's own
// directory: its workers' --cache, their children's --spec), by pid.
std::vector<std::string> ProcessesWithArgument(const std::string& prefix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline(std::istreambuf_iterator<char>(in), {});
    for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
      if (absl::StartsWith(arg, prefix)) {
        found.push_back(pid);
        break;
      }
    }
  }
  return found;
}

// The whole reply (status line, headers, body) to `GET path` from
// 127.0.0.1:port, or "" when the port cannot be reached.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) reply.append(buffer, n);
    }
  }
  close(fd);
  return reply;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }

  // Starts `smallemctl run` on one long run, with `extra` flags, and returns
  // once its worker's training child is running; `out` (if given) gets what
  // smallemctl printed so far.
  std::unique_ptr<ChildProcess> StartLongRun(const std::vector<std::string>& extra = {},
                                             std::vector<std::string>* out = nullptr) {
    const std::string data = dir_.Join("data");
    EXPECT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
    const std::string grid = dir_.Join("grid.yaml");
    testing::WriteFile(grid, testing::TinyGridYaml("long", data, 1, 1, kLongSteps));
    std::vector<std::string> args = {"run", grid, "--db", db(), "--cache", cache(), "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> ctl = ChildProcess::Spawn(testing::CtlBinary(), args);
    EXPECT_TRUE(ctl.ok()) << ctl.status();
    if (!ctl.ok()) return nullptr;
    const std::string spec = cache() + "/jobs/run-1-attempt-1/spec.json";
    EXPECT_TRUE(WaitFor([&] { return !ProcessesWithArgument(spec).empty(); }, ctl->get(), out))
        << "the run's child never started; smallemctl said: " << (*ctl)->last_stderr_line();
    return std::move(*ctl);
  }

  // Polls `done` every 20 ms for up to a minute, draining `ctl`'s output
  // (into `out` when given).
  template <typename Done>
  static bool WaitFor(Done done, ChildProcess* ctl, std::vector<std::string>* out = nullptr) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    std::vector<std::string> lines;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      if (ctl != nullptr) ctl->Poll(0, out != nullptr ? out : &lines);
      lines.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  std::string db() const { return dir_.Join("smallem.db"); }
  std::string cache() const { return dir_.Join("cache"); }

  TempDir dir_;
};

TEST_F(CliTest, RunTrainsEveryCellPrintsTheReportAndResumes) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("cli", data, 2, 2, 20));
  const std::vector<std::string> args = {"run", grid, "--db", dir_.Join("smallem.db"),
                                         "--cache", dir_.Join("cache"), "--format", "csv"};
  Output first = RunCtl(args);
  ASSERT_EQ(first.exit.exit_code, 0) << first.out << "\n" << first.last_error;
  EXPECT_NE(first.out.find("4 runs (4 new"), std::string::npos) << first.out;
  // Nothing timed: one single-thread worker per core, sharing one cache.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_NE(first.out.find(absl::StrCat("workers: ", cores, " × 1 thread — one run per core")),
            std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find("cli,v0,baseline"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("cli,v1,"), std::string::npos) << first.out;

  Output again = RunCtl(args);
  ASSERT_EQ(again.exit.exit_code, 0) << again.out << "\n" << again.last_error;
  EXPECT_NE(again.out.find("4 runs (0 new, 0 reissued, 4 already done, 0 pending)"),
            std::string::npos)
      << again.out;

  // The same database behind a coordinator: `watch` of a finished run
  // ends with its result for a person, not one line of JSON.
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", dir_.Join("smallem.db")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  Output watched = RunCtl({"watch", "1", "--coordinator", coordinator->address});
  EXPECT_EQ(watched.exit.exit_code, 0) << watched.last_error;
  EXPECT_NE(watched.out.find("result: validation "), std::string::npos) << watched.out;
  EXPECT_NE(watched.out.find(" nats/byte"), std::string::npos) << watched.out;
  // One line of it, not the whole result JSON.
  EXPECT_EQ(watched.out.find("\"val_nats_per_byte\""), std::string::npos) << watched.out;
  EXPECT_NE(watched.out.find(" steps · "), std::string::npos) << watched.out;
  EXPECT_NE(watched.out.find(" s of training"), std::string::npos) << watched.out;

  // `status` says which loss its column holds: training nats per token,
  // not the report's validation nats per byte.
  Output status = RunCtl({"status", "cli", "--coordinator", coordinator->address});
  EXPECT_EQ(status.exit.exit_code, 0) << status.last_error;
  EXPECT_NE(status.out.find("train nats/token"), std::string::npos) << status.out;

  // Resubmitted with another budget, the grid says what changes.
  const std::string longer = dir_.Join("longer.yaml");
  testing::WriteFile(longer, testing::TinyGridYaml("cli", data, 2, 2, 40));
  Output resubmitted = RunCtl({"submit", longer, "--coordinator", coordinator->address});
  ASSERT_EQ(resubmitted.exit.exit_code, 0) << resubmitted.last_error;
  EXPECT_NE(resubmitted.out.find("submitted before with another budget (4 runs at steps:20)"),
            std::string::npos)
      << resubmitted.out;
  EXPECT_NE(resubmitted.out.find("the report now compares at steps:40"), std::string::npos)
      << resubmitted.out;
}

// The budget-change note is news once: a later submission of the same
// grid is told nothing, going back to the old budget is told again.
TEST_F(CliTest, TheBudgetChangeNoteIsGivenOnlyWhenTheBudgetChanges) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", db()});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string shorter = dir_.Join("shorter.yaml");
  const std::string longer = dir_.Join("longer.yaml");
  testing::WriteFile(shorter, testing::TinyGridYaml("budget", data, 2, 1, 20));
  testing::WriteFile(longer, testing::TinyGridYaml("budget", data, 2, 1, 40));
  const auto submit = [&](const std::string& grid) {
    Output o = RunCtl({"submit", grid, "--coordinator", coordinator->address});
    EXPECT_EQ(o.exit.exit_code, 0) << o.last_error;
    return o.out.find("submitted before with another budget") != std::string::npos;
  };
  EXPECT_FALSE(submit(shorter));  // new
  EXPECT_TRUE(submit(longer));    // 20 → 40
  EXPECT_FALSE(submit(longer));   // nothing changed since
  EXPECT_FALSE(submit(longer));
  EXPECT_TRUE(submit(shorter));   // back to 20
}

TEST_F(CliTest, AGridWhoseDatasetIsMissingNamesTheFileLineAndKey) {
  const std::string grid = dir_.Join("nodata.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("nodata", dir_.Join("absent"), 1, 1));
  Output o = RunCtl({"run", grid, "--db", dir_.Join("smallem.db")});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("nodata.yaml:2: \"data\": "), std::string::npos) << o.last_error;
  EXPECT_NE(o.last_error.find("smallemctl data prepare --out"), std::string::npos)
      << o.last_error;
}

// The line of `out` that starts with `prefix`, or "".
std::string LineStartingWith(const std::string& out, const std::string& prefix) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line);
  }
  return "";
}

// `eval` takes the evaluation settings of the run that wrote the weights
// (its result.json), so it prints the loss `train` printed — here with a
// training batch and evaluation settings that all differ from the defaults.
TEST_F(CliTest, EvalReproducesTheLossTrainPrinted) {
  PrepareOptions options;
  options.files = testing::WriteTinyCorpus(dir_.Join("corpus"), /*documents=*/40);
  options.vocab = 300;
  options.out_dir = dir_.Join("data");
  options.val_fraction = 0.34;
  ASSERT_TRUE(PrepareDataset(options).ok());
  const std::string run = dir_.Join("run");
  Output train = RunCtl({"train", "--data", options.out_dir, "--layers", "1", "--heads", "2",
                         "--embed", "32", "--context", "32", "--batch", "4", "--steps", "10",
                         "--eval-batches", "1", "--eval-batch-size", "3", "--threads", "2",
                         "--out", run});
  ASSERT_EQ(train.exit.exit_code, 0) << train.out << "\n" << train.last_error;
  const std::string trained = LineStartingWith(train.out, "validation:");
  ASSERT_NE(trained, "") << train.out;
  EXPECT_NE(trained.find("(16 spans × 64 target tokens)"), std::string::npos) << trained;

  Output eval = RunCtl({"eval", "--weights", run + "/weights.safetensors", "--data",
                        options.out_dir, "--threads", "2"});
  ASSERT_EQ(eval.exit.exit_code, 0) << eval.out << "\n" << eval.last_error;
  EXPECT_EQ(LineStartingWith(eval.out, "validation:"), trained) << eval.out;
  EXPECT_NE(eval.out.find("on the same validation text"), std::string::npos) << eval.out;

  // The default settings would score other text: 200 batches, as many
  // spans as the split holds.
  Output other = RunCtl({"eval", "--weights", run + "/weights.safetensors", "--data",
                         options.out_dir, "--threads", "2", "--eval-batches", "200"});
  ASSERT_EQ(other.exit.exit_code, 0) << other.out << "\n" << other.last_error;
  EXPECT_NE(LineStartingWith(other.out, "validation:"), trained) << other.out;
  EXPECT_NE(other.out.find("on other validation text"), std::string::npos) << other.out;

  // The run again from its result.json, its budget replaced by --steps.
  const std::string again = dir_.Join("again");
  Output rerun = RunCtl({"train", "--spec", run + "/result.json", "--steps", "4", "--threads",
                         "1", "--out", again});
  ASSERT_EQ(rerun.exit.exit_code, 0) << rerun.out << "\n" << rerun.last_error;
  std::ifstream in(again + "/result.json");
  const nlohmann::json result = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["steps"], 4);
  EXPECT_EQ(result["config"]["embed"], 32);        // the spec came from the result
  EXPECT_EQ(result["config"]["eval_batch_size"], 3);
}

TEST_F(CliTest, MalformedGridExitsWith2AndNamesFileLineAndKey) {
  const std::string grid = dir_.Join("bad.yaml");
  testing::WriteFile(grid,
                     "name: bad\ndata: d\nbudget: {steps: 10}\nseeds: [1]\nbaseline: a\n"
                     "variants:\n  a: {optimiser: adamw}\n");
  Output o = RunCtl({"run", grid, "--db", dir_.Join("smallem.db")});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("bad.yaml:7"), std::string::npos) << o.last_error;
  EXPECT_NE(o.last_error.find("optimizer"), std::string::npos) << o.last_error;
}

TEST_F(CliTest, UnreachableCoordinatorSaysHowToStartOne) {
  Output o = RunCtl({"status", "--coordinator", "127.0.0.1:1", "--timeout", "2"});
  EXPECT_EQ(o.exit.exit_code, 1);
  EXPECT_NE(o.last_error.find("smallem-coordinator"), std::string::npos) << o.last_error;
}

TEST_F(CliTest, InterruptedRunStopsItsWorkersRequeuesTheRunAndSaysHowToResume) {
  std::unique_ptr<ChildProcess> ctl = StartLongRun();
  ASSERT_NE(ctl, nullptr);
  kill(ctl->pid(), SIGINT);  // Ctrl-C
  std::vector<std::string> lines;
  while (ctl->Poll(100, &lines)) {
  }
  EXPECT_EQ(ctl->Wait().exit_code, 130);
  EXPECT_NE(ctl->last_stderr_line().find("again to resume"), std::string::npos)
      << ctl->last_stderr_line();
  // The command to resume keeps the database, cache and threads it ran with.
  EXPECT_NE(ctl->last_stderr_line().find(absl::StrCat("--db ", db(), " --cache ", cache(),
                                                      " --threads 1")),
            std::string::npos)
      << ctl->last_stderr_line();
  // smallemctl waited for its workers, and they for their children.
  EXPECT_EQ(ProcessesWithArgument(cache()), std::vector<std::string>{});
  // The worker gave the run back: queued again at once, not left leased,
  // and charged to nothing (its attempt was released, not lost). Read
  // read-only: the `run` below owns the file.
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::OpenReadOnly(db());
  ASSERT_TRUE(store.ok()) << store.status();
  RunRecord run = *(*store)->GetRun(1);
  EXPECT_EQ(run.status, RunStatus::kQueued);
  EXPECT_EQ(run.lease_losses, 0);
  EXPECT_EQ(run.engine_failures, 0);
  EXPECT_EQ((*(*store)->ListAttempts(1))[0].outcome, kReleasedOutcome);

  // Run again, the run it left is counted as pending, not as done.
  absl::StatusOr<std::unique_ptr<ChildProcess>> again = ChildProcess::Spawn(
      testing::CtlBinary(),
      {"run", dir_.Join("grid.yaml"), "--db", db(), "--cache", cache(), "--threads", "1"});
  ASSERT_TRUE(again.ok()) << again.status();
  std::vector<std::string> out;
  const auto counted = [&] {
    for (const std::string& line : out) {
      if (line.find(" (0 new, ") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(counted, again->get(), &out)) << absl::StrJoin(out, "\n");
  kill((*again)->pid(), SIGINT);
  while ((*again)->Poll(100, &out)) {
  }
  (*again)->Wait();
  EXPECT_NE(absl::StrJoin(out, "\n").find("long: 1 run (0 new, 0 reissued, 0 already done, "
                                           "1 pending)"),
            std::string::npos)
      << absl::StrJoin(out, "\n");
}

TEST_F(CliTest, KilledSmallemctlTakesItsWorkersAndTheirChildrenWithIt) {
  std::unique_ptr<ChildProcess> ctl = StartLongRun();
  ASSERT_NE(ctl, nullptr);
  ctl->Kill();  // kill -9: nothing of smallemctl runs to stop them
  EXPECT_EQ(ctl->Wait().signal, SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithArgument(cache()).empty(); }, nullptr))
      << "left running: " << absl::StrJoin(ProcessesWithArgument(cache()), " ");
}

// `run --http` serves the dashboard from the embedded coordinator while the
// grid runs: it prints the address, and the experiment is there.
TEST_F(CliTest, RunWithHttpServesTheDashboardWhileTheGridRuns) {
  std::vector<std::string> out;
  std::unique_ptr<ChildProcess> ctl = StartLongRun({"--http", "127.0.0.1:0"}, &out);
  ASSERT_NE(ctl, nullptr);
  int port = 0;
  for (const std::string& line : out) {
    if (std::sscanf(line.c_str(), "dashboard: http://127.0.0.1:%d/", &port) == 1) break;
  }
  ASSERT_GT(port, 0) << "no dashboard line in: " << absl::StrJoin(out, "\n");
  const std::string reply = HttpGet(port, "/api/experiments");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200")) << reply;
  EXPECT_NE(reply.find("\"long\""), std::string::npos) << reply;
  kill(ctl->pid(), SIGINT);
  std::vector<std::string> lines;
  while (ctl->Poll(100, &lines)) {
  }
  EXPECT_EQ(ctl->Wait().exit_code, 130);
  // The command to resume keeps the dashboard.
  EXPECT_NE(ctl->last_stderr_line().find("--http 127.0.0.1:0"), std::string::npos)
      << ctl->last_stderr_line();
}

}  // namespace
}  // namespace smallem
