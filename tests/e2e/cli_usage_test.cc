// What a new user meets first: help, the version, a mistyped verb or flag,
// and values no command can use. The real smallemctl binary, run as a
// process.
#include <string>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;

class CliUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }
};

TEST_F(CliUsageTest, VersionNamesTheVersionAndTheCommit) {
  testing::CtlOutput o = RunCtl({"--version"});
  EXPECT_EQ(o.exit.exit_code, 0);
  EXPECT_NE(o.out.find("smallemctl 0."), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("(commit "), std::string::npos) << o.out;
}

TEST_F(CliUsageTest, HelpIsAVerbToo) {
  testing::CtlOutput o = RunCtl({"help"});
  EXPECT_EQ(o.exit.exit_code, 0);
  EXPECT_NE(o.out.find("submit"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("generate"), std::string::npos) << o.out;
}

TEST_F(CliUsageTest, HelpOfAVerbIsThatVerbsHelp) {
  testing::CtlOutput train = RunCtl({"help", "train"});
  EXPECT_EQ(train.exit.exit_code, 0) << train.last_error;
  EXPECT_NE(train.out.find("--steps"), std::string::npos) << train.out;
  EXPECT_EQ(train.out.find("--retries"), std::string::npos) << train.out;  // submit's
  testing::CtlOutput backup = RunCtl({"help", "admin", "backup"});
  EXPECT_EQ(backup.exit.exit_code, 0) << backup.last_error;
  EXPECT_NE(backup.out.find("online backup"), std::string::npos) << backup.out;
  testing::CtlOutput typo = RunCtl({"help", "trian"});
  EXPECT_EQ(typo.exit.exit_code, 2);
  EXPECT_NE(typo.last_error.find("(did you mean \"train\"?)"), std::string::npos)
      << typo.last_error;
}

TEST_F(CliUsageTest, TheArchitecturesDefaultIsInTheHelp) {
  testing::CtlOutput o = RunCtl({"train", "--help"});
  EXPECT_NE(o.out.find("gpt2 | modern (default gpt2"), std::string::npos) << o.out;
}

// A URL copied from a browser is not an address gRPC can dial: said at once,
// not as a failed DNS lookup of "http".
TEST_F(CliUsageTest, ACoordinatorUrlIsToldToDropItsScheme) {
  testing::CtlOutput o =
      RunCtl({"status", "--coordinator", "http://127.0.0.1:7070", "--timeout", "2"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_EQ(o.last_error.rfind("error: --coordinator http://127.0.0.1:7070: drop the http://", 0),
            0u)
      << o.last_error;
  EXPECT_NE(o.last_error.find("--coordinator 127.0.0.1:7070)"), std::string::npos)
      << o.last_error;
}

TEST_F(CliUsageTest, AMistypedVerbSuggestsTheNearestOne) {
  testing::CtlOutput o = RunCtl({"trian", "--steps", "5"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("unknown command \"trian\" (did you mean \"train\"?)"),
            std::string::npos)
      << o.last_error;
}

TEST_F(CliUsageTest, AMistypedFlagSuggestsTheNearestOne) {
  testing::CtlOutput o = RunCtl({"train", "--stpes", "5"});
  EXPECT_NE(o.exit.exit_code, 0);
  // The flag and the suggestion lead, not CLI11's "not expected: 5 --stpes".
  EXPECT_EQ(o.last_error.rfind("error: unknown flag --stpes (did you mean --steps?)", 0), 0u)
      << o.last_error;
  EXPECT_NE(o.last_error.find("`smallemctl train --help`"), std::string::npos) << o.last_error;
  EXPECT_EQ(o.last_error.find("not expected"), std::string::npos) << o.last_error;
}

// One table of exit codes, in the help: every error the flags cause is 2
// (the input is at fault), on one line that starts "error: ", whichever
// part of the command line found it.
TEST_F(CliUsageTest, EveryFlagErrorExitsTwoWithOneErrorLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"train", "--stpes", "5"},                  // unknown flag
           {"train", "--threads", "-3"},               // out of range
           {"generate"},                               // required flag missing
           {"trian"},                                  // unknown verb
           {"help", "trian"},                          // unknown verb to help with
           {"status", "--token-file", "/nonexistent"}}) {
    testing::CtlOutput o = RunCtl(args);
    EXPECT_EQ(o.exit.exit_code, 2) << args[0] << " " << args.back() << ": " << o.last_error;
    EXPECT_EQ(o.last_error.rfind("error: ", 0), 0u) << o.last_error;
  }
  testing::CtlOutput help = RunCtl({"--help"});
  EXPECT_EQ(help.exit.exit_code, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("  2  the input is at fault"), std::string::npos) << help.out;
}

TEST_F(CliUsageTest, ValuesNoCommandCanUseAreRefusedBeforeAnyWork) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"generate", "--weights", "w.safetensors", "--temperature", "-1"},
           {"generate", "--weights", "w.safetensors", "--tokens", "-5"},
           {"generate", "--weights", "w.safetensors", "--top-k", "-3"},
           {"train", "--threads", "-3"},
           {"run", "grid.yaml", "--workers", "-1"}}) {
    testing::CtlOutput o = RunCtl(args);
    // CLI11's validation error, before anything is read or trained.
    EXPECT_NE(o.exit.exit_code, 0) << args[0] << " " << args[args.size() - 2];
    EXPECT_EQ(o.out, "") << args[0] << " " << args[args.size() - 2];
  }
}

TEST_F(CliUsageTest, CancellingOrRetryingNothingSaysWhy) {
  testing::TempDir dir;
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", dir.Join("smallem.db")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  // A run that does not exist is named as such (the input is at fault: 2),
  // not reported as "nothing to do".
  testing::CtlOutput cancel =
      RunCtl({"cancel", "--run", "999", "--coordinator", coordinator->address});
  EXPECT_EQ(cancel.exit.exit_code, 2);
  EXPECT_NE(cancel.last_error.find("no run with id 999"), std::string::npos)
      << cancel.out << cancel.last_error;
  testing::CtlOutput retry = RunCtl({"retry", "--run", "999", "--coordinator", coordinator->address});
  EXPECT_EQ(retry.exit.exit_code, 2);
  EXPECT_NE(retry.last_error.find("no run with id 999"), std::string::npos)
      << retry.out << retry.last_error;
}

TEST_F(CliUsageTest, TrainWithoutDataSaysWhatToPassFirst) {
  testing::CtlOutput o = RunCtl({"train", "--steps", "5"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_EQ(o.last_error.rfind("error: --data is required", 0), 0u) << o.last_error;
  EXPECT_NE(o.last_error.find("smallemctl data prepare"), std::string::npos) << o.last_error;
}

// The engine's environment is read at start-up into options: a bad value
// is the input at fault (2), one error line naming the variable and the
// choices, before any data is read; train's help lists the variables.
TEST_F(CliUsageTest, ABadEngineVariableIsRefusedAtStartUp) {
  ASSERT_EQ(setenv("SMALLEM_GEMM", "mkl", 1), 0);
  testing::CtlOutput o = RunCtl({"train", "--data", "/nonexistent", "--steps", "5"});
  ASSERT_EQ(unsetenv("SMALLEM_GEMM"), 0);
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_EQ(o.last_error.rfind("error: SMALLEM_GEMM: \"mkl\" is not a GEMM library", 0), 0u)
      << o.last_error;
  EXPECT_NE(o.last_error.find("loop"), std::string::npos) << o.last_error;
  testing::CtlOutput help = RunCtl({"train", "--help"});
  EXPECT_NE(help.out.find("SMALLEM_ATTENTION=auto|tiles|blas"), std::string::npos) << help.out;
}

TEST_F(CliUsageTest, TrainTakesTheSpecOfAResultAndABudgetFlagReplacesItsBudget) {
  testing::TempDir dir;
  // A result.json as `train` writes it: the spec under "config", beside
  // keys that are not run-spec keys ("activations", ...).
  const std::string result = dir.Join("result.json");
  testing::WriteFile(result, R"({"val_nats_per_byte": 2.25, "activations": "f32",
      "device_class": "cpu-1t", "steps": 20, "seed": 3,
      "config": {"data": ")" + dir.Join("absent") + R"(", "layers": 1, "heads": 2,
                 "embed": 32, "context": 32, "batch": 4, "steps": 20, "seed": 3}})");
  testing::CtlOutput o = RunCtl({"train", "--spec", result, "--minutes", "0.01"});
  // Accepted as far as the dataset, which this test leaves out on purpose.
  EXPECT_EQ(o.last_error.find("unknown key"), std::string::npos) << o.last_error;
  EXPECT_EQ(o.last_error.find("not both"), std::string::npos) << o.last_error;
  EXPECT_NE(o.last_error.find("no such dataset directory"), std::string::npos) << o.last_error;
}

// The dashboard's address is the one in a browser's bar; pointed at with
// --coordinator, it is named for what it is.
TEST_F(CliUsageTest, TheDashboardsPortIsCalledAnHttpPortNotTheCoordinators) {
  testing::TempDir dir;
  absl::StatusOr<testing::CoordinatorProcess> coordinator = testing::StartCoordinatorProcess(
      {"--db", dir.Join("smallem.db"), "--http", "127.0.0.1:0"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  // The line after "listening on": "dashboard at http://127.0.0.1:PORT/ ...".
  constexpr std::string_view kDashboard = "dashboard at http://";
  std::string dashboard;
  std::vector<std::string> lines = coordinator->later_lines;
  // (300 polls of 100 ms bound a coordinator that stays silent.)
  for (int polls = 0; dashboard.empty() && polls < 300; ++polls) {
    for (const std::string& line : lines) {
      const size_t at = line.find(kDashboard);
      if (at == std::string::npos) continue;
      const size_t begin = at + kDashboard.size();
      dashboard = line.substr(begin, line.find('/', begin) - begin);
    }
    lines.clear();
    if (dashboard.empty() && !coordinator->process->Poll(100, &lines)) break;
  }
  ASSERT_FALSE(dashboard.empty()) << "the coordinator never named its dashboard";
  testing::CtlOutput o = RunCtl({"status", "--coordinator", dashboard, "--timeout", "5"});
  EXPECT_EQ(o.exit.exit_code, 1);
  EXPECT_EQ(o.last_error.rfind("error: cannot reach the coordinator at " + dashboard +
                                   ": that is an HTTP/1 port (the dashboard's",
                               0),
            0u)
      << o.last_error;
  EXPECT_EQ(o.last_error.find("http1.x"), std::string::npos) << o.last_error;
  // The coordinator's own port answers.
  EXPECT_EQ(RunCtl({"status", "--coordinator", coordinator->address}).exit.exit_code, 0);
}

TEST_F(CliUsageTest, ASpecFilesUnknownKeyIsNamedWithItsLineAndTheNearestKey) {
  testing::TempDir dir;
  const std::string spec = dir.Join("spec.json");
  testing::WriteFile(spec, "{\n  \"layers\": 1,\n  \"lrr\": 0.01\n}\n");
  testing::CtlOutput o = RunCtl({"train", "--spec", spec, "--steps", "1"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find(spec + ":3: unknown key \"lrr\" (did you mean \"lr\"?)"),
            std::string::npos)
      << o.last_error;
  // In a result.json, the line inside its "config", not a same-named key
  // of the result itself.
  const std::string result = dir.Join("result.json");
  testing::WriteFile(result, "{\"val_nats_per_byte\": 2.0, \"steps\": 10,\n"
                             " \"config\": {\"layers\": 1,\n"
                             "            \"stpes\": 10}}\n");
  o = RunCtl({"train", "--spec", result});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find(result + ":3: unknown key \"stpes\" (did you mean \"steps\"?)"),
            std::string::npos)
      << o.last_error;
}

TEST_F(CliUsageTest, ACorpusOfOnlyWhitespaceIsRefusedByName) {
  testing::TempDir dir;
  testing::WriteFile(dir.Join("blank.txt"), "  \n\t\n  ");
  testing::CtlOutput o =
      RunCtl({"data", "prepare", dir.Join("blank.txt"), "--out", dir.Join("data")});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("blank.txt: holds only whitespace"), std::string::npos)
      << o.last_error;
}

TEST_F(CliUsageTest, ACoordinatorAddressWithoutAPortIsCalledWhatItIs) {
  testing::CtlOutput o = RunCtl({"status", "--coordinator", "nohost", "--timeout", "2"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("--coordinator nohost: expected HOST:PORT"), std::string::npos)
      << o.last_error;
  EXPECT_EQ(o.last_error.find("--listen"), std::string::npos) << o.last_error;
}

// A token pasted where its file's path belongs is never printed back, by
// any verb that takes --token-file; the help says the flag takes a path.
TEST_F(CliUsageTest, ATokenGivenAsTheTokenFileIsNeverEchoed) {
  const std::string token = "12EQtzUVpasted0123456789abcdef";
  for (const char* verb : {"status", "submit", "watch", "report", "noise", "export", "cancel",
                           "retry", "workers"}) {
    std::vector<std::string> args = {verb};
    if (std::string(verb) == "submit") args.push_back("grid.yaml");
    if (std::string(verb) == "watch") args.push_back("1");
    if (std::string(verb) == "report" || std::string(verb) == "noise" ||
        std::string(verb) == "export") {
      args.push_back("demo");
    }
    args.insert(args.end(), {"--token-file", token, "--coordinator", "127.0.0.1:1"});
    testing::CtlOutput o = RunCtl(args);
    EXPECT_NE(o.exit.exit_code, 0) << verb;
    EXPECT_EQ(o.out.find("12EQtzUV"), std::string::npos) << verb << ": " << o.out;
    EXPECT_EQ(o.last_error.find("12EQtzUV"), std::string::npos) << verb << ": " << o.last_error;
    EXPECT_NE(o.last_error.find("--token-file: no such file"), std::string::npos)
        << verb << ": " << o.last_error;
  }
  testing::CtlOutput help = RunCtl({"status", "--help"});
  EXPECT_NE(help.out.find("file holding the coordinator's client token, not the token"),
            std::string::npos)
      << help.out;
}

TEST_F(CliUsageTest, WatchingARunThatDoesNotExistPrintsOnlyTheError) {
  testing::TempDir dir;
  absl::StatusOr<testing::CoordinatorProcess> coordinator =
      testing::StartCoordinatorProcess({"--db", dir.Join("smallem.db")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  testing::CtlOutput o = RunCtl({"watch", "999", "--coordinator", coordinator->address});
  EXPECT_NE(o.exit.exit_code, 0);
  EXPECT_EQ(o.out, "");  // no progress line of a run that is not there
  EXPECT_NE(o.last_error.find("no run with id 999"), std::string::npos) << o.last_error;
}

TEST_F(CliUsageTest, OneThreadIsOneThread) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> ctl = ChildProcess::Spawn(
      testing::CtlBinary(),
      {"train", "--data", dir.Join("absent"), "--threads", "1", "--steps", "1"});
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  std::vector<std::string> lines;
  while ((*ctl)->Poll(100, &lines)) {
  }
  (*ctl)->Wait();
  // "training on cpu-1t-… (1 thread, products on …): {…}" comes before the
  // dataset's error.
  const std::vector<std::string> tail = (*ctl)->stderr_tail();
  ASSERT_GE(tail.size(), 2u);
  const std::string& training = tail[tail.size() - 2];
  EXPECT_NE(training.find("(1 thread, products on "), std::string::npos) << training;
}

}  // namespace
}  // namespace smallem
