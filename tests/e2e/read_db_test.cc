// The read-only verbs on a database file with no coordinator (--db FILE):
// what a user who ran `smallemctl run` has, and all they need to reread
// its report, draw its figure, list its runs and export its curves.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;
using testing::TempDir;
using Output = testing::CtlOutput;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ReadDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  }
  std::string db() const { return dir_.Join("smallem.db"); }

  TempDir dir_;
};

TEST_F(ReadDbTest, RunsReportIsRereadAndDrawnFromItsDatabaseWithNoCoordinator) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("reread", data, 2, 1, 20));
  Output run = RunCtl({"run", grid, "--db", db(), "--cache", dir_.Join("cache"), "--threads", "1"});
  ASSERT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  // Its closing lines give the commands, whole.
  const std::string reread = "smallemctl report reread --db " + db();
  EXPECT_NE(run.out.find("this report again (no server needed): " + reread), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(reread + " --plot reread.svg"), std::string::npos) << run.out;

  // No coordinator runs now (run's embedded one is gone): the report read
  // from the file is the one run printed.
  Output report = RunCtl({"report", "reread", "--db", db()});
  ASSERT_EQ(report.exit.exit_code, 0) << report.out << "\n" << report.last_error;
  ASSERT_FALSE(report.out.empty());
  EXPECT_NE(run.out.find(report.out), std::string::npos)
      << "run printed:\n" << run.out << "\nreport --db printed:\n" << report.out;

  const std::string figure = dir_.Join("reread.svg");
  Output plot = RunCtl({"report", "reread", "--db", db(), "--plot", figure});
  ASSERT_EQ(plot.exit.exit_code, 0) << plot.last_error;
  EXPECT_TRUE(absl::StrContains(Slurp(figure), "<svg")) << Slurp(figure).substr(0, 200);
  // The steps panel draws each arm's training curve from the stored
  // progress points (every 10 steps of 20: two points each).
  EXPECT_TRUE(absl::StrContains(Slurp(figure), "class=\"training-curve\""))
      << Slurp(figure);

  Output status = RunCtl({"status", "--db", db()});
  ASSERT_EQ(status.exit.exit_code, 0) << status.last_error;
  EXPECT_TRUE(absl::StartsWith(status.out, "reread")) << status.out;
  Output runs = RunCtl({"status", "reread", "--db", db()});
  ASSERT_EQ(runs.exit.exit_code, 0) << runs.last_error;
  EXPECT_NE(runs.out.find("succeeded"), std::string::npos) << runs.out;

  Output noise = RunCtl({"noise", "reread", "--db", db()});
  EXPECT_EQ(noise.exit.exit_code, 0) << noise.last_error;

  const std::string csv = dir_.Join("reread.csv");
  Output exported = RunCtl({"export", "reread", "--db", db(), "--csv", csv});
  ASSERT_EQ(exported.exit.exit_code, 0) << exported.last_error;
  EXPECT_TRUE(absl::StartsWith(Slurp(csv), "experiment,run_id,")) << Slurp(csv);
  EXPECT_NE(Slurp(csv).find("\nreread,1,v0,"), std::string::npos) << Slurp(csv);

  // Reading wrote nothing: the database is what run left.
  EXPECT_FALSE(std::filesystem::exists(db() + "-journal"));
}

TEST_F(ReadDbTest, AnUnknownExperimentNamesTheCommandThatListsThemAll) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string grid = dir_.Join("grid.yaml");
  testing::WriteFile(grid, testing::TinyGridYaml("known", data, 2, 1, 10));
  Output run = RunCtl({"run", grid, "--db", db(), "--cache", dir_.Join("cache"), "--threads", "1"});
  ASSERT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  // Every read-only verb: the listing command is this database's, with
  // --all (status hides experiments whose every run was cancelled), not a
  // bare `smallemctl status`, which would ask a coordinator.
  const std::string list = "`smallemctl status --db " + db() + " --all` lists them all";
  for (const std::vector<std::string>& verb :
       {std::vector<std::string>{"report", "unknown"}, {"report", "unknown", "--plot", dir_.Join("u.svg")},
        {"noise", "unknown"}, {"status", "unknown"}, {"export", "unknown", "--csv", dir_.Join("u.csv")},
        {"report", "99"}}) {
    std::vector<std::string> args = verb;
    args.insert(args.end(), {"--db", db()});
    Output o = RunCtl(args);
    EXPECT_EQ(o.exit.exit_code, 2) << verb[0];
    const std::string what = verb[1] == "99" ? "no experiment with id 99"
                                             : "no experiment named \"unknown\"";
    EXPECT_NE(o.last_error.find(what + " (" + list + ")"), std::string::npos)
        << verb[0] << ": " << o.last_error;
  }
}

TEST_F(ReadDbTest, AMissingDatabaseIsNamedAndNotCreated) {
  const std::string absent = dir_.Join("absent.db");
  Output o = RunCtl({"report", "demo", "--db", absent});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("--db " + absent + ": no such database file"), std::string::npos)
      << o.last_error;
  EXPECT_FALSE(std::filesystem::exists(absent));
}

TEST_F(ReadDbTest, DbAndCoordinatorAreOneOrTheOther) {
  Output o = RunCtl({"status", "--db", db(), "--coordinator", "127.0.0.1:7070"});
  EXPECT_EQ(o.exit.exit_code, 2);
  EXPECT_NE(o.last_error.find("--db"), std::string::npos) << o.last_error;
}

}  // namespace
}  // namespace smallem
