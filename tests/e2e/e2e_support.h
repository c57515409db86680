// Helpers of the end-to-end tests, which start the real binaries: run
// smallemctl to completion, and start a coordinator process on a port it
// binds itself (port 0), reading back where it listens.
#ifndef SMALLEM_TESTS_E2E_E2E_SUPPORT_H_
#define SMALLEM_TESTS_E2E_E2E_SUPPORT_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem::testing {

struct CtlOutput {
  ChildExit exit;
  std::string out;  // stdout, lines joined with '\n'
  std::string last_error;
};

// Runs smallemctl (or `binary`) with `args` until it exits.
inline CtlOutput RunCtl(const std::vector<std::string>& args,
                        const std::string& binary = CtlBinary()) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> ctl = ChildProcess::Spawn(binary, args);
  EXPECT_TRUE(ctl.ok()) << ctl.status();
  if (!ctl.ok()) return CtlOutput{};
  std::vector<std::string> lines;
  while ((*ctl)->Poll(100, &lines)) {
  }
  CtlOutput o;
  o.exit = (*ctl)->Wait();
  o.out = absl::StrJoin(lines, "\n");
  o.last_error = (*ctl)->last_stderr_line();
  return o;
}

// Runs `smallemctl run` (one thread per run, CSV report) on a grid of the
// tiny model over a tiny dataset prepared in `dir`: `base_extra` appended to
// the base's keys ("" or ", warmup: 0"), `steps` steps, seed 1, and
// `variants` (YAML lines "  name: {...}\n"), the first named `baseline`.
// The database is `dir`/smallem.db.
inline CtlOutput RunTinyGrid(const TempDir& dir, const std::string& name,
                             const std::string& base_extra, int steps,
                             const std::string& baseline, const std::string& variants) {
  const std::string data = dir.Join("data");
  EXPECT_TRUE(PrepareTinyDataset(dir.path(), data).ok());
  const std::string grid = dir.Join("grid.yaml");
  WriteFile(grid, absl::StrCat("name: ", name, "\ndata: ", data,
                               "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, "
                               "batch: 4, eval_batches: 4",
                               base_extra, "}\nbudget: {steps: ", steps,
                               "}\nseeds: [1]\nbaseline: ", baseline, "\nvariants:\n", variants));
  return RunCtl({"run", grid, "--db", dir.Join("smallem.db"), "--cache", dir.Join("cache"),
                 "--threads", "1", "--format", "csv"});
}

struct CoordinatorProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;  // where it listens: 127.0.0.1:<the port it bound>
  // What it printed after that line and was read with it (the dashboard's
  // address, say); later lines are process->Poll's.
  std::vector<std::string> later_lines;
};

// Starts smallem-coordinator with `args` (not --listen or --log-level) on
// `listen` and waits (up to `timeout`) for the line saying where it listens,
// which it logs once the port is bound. The default, port 0, lets the
// coordinator bind a free port itself — no other process can take it
// between a check and the bind; pass a previous run's address to restart
// one where its workers look for it. Internal with the coordinator's last
// words when it exits first or stays silent.
inline absl::StatusOr<CoordinatorProcess> StartCoordinatorProcess(
    std::vector<std::string> args, const std::string& listen = "127.0.0.1:0",
    std::chrono::seconds timeout = std::chrono::seconds(30)) {
  args.insert(args.end(), {"--listen", listen, "--log-level", "info"});
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Spawn(CoordinatorBinary(), args);
  if (!process.ok()) return process.status();
  constexpr std::string_view kListening = "listening on ";
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  bool open = true;
  std::string last_line;  // spdlog writes to stdout, errors included
  while (open && std::chrono::steady_clock::now() < give_up) {
    std::vector<std::string> lines;
    open = (*process)->Poll(100, &lines);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      last_line = line;
      const size_t at = line.find(kListening);
      if (at == std::string::npos) continue;
      const size_t begin = at + kListening.size();
      return CoordinatorProcess{.process = *std::move(process),
                                .address = line.substr(begin, line.find(' ', begin) - begin),
                                .later_lines = {lines.begin() + i + 1, lines.end()}};
    }
  }
  return absl::InternalError(absl::StrCat(
      "smallem-coordinator ", open ? "never said where it listens" : "exited", "; it last said: ",
      last_line, " ", (*process)->last_stderr_line()));
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_E2E_E2E_SUPPORT_H_
