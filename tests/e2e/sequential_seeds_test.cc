// Sequential seeds through the service with real processes: a coordinator
// in this process, two smallem-worker daemons training a tiny model on the
// CPU, and a grid whose `fast` variant (a 20× learning rate) is decided at
// the first look while `near` (1 % off the baseline's) stays open and gets
// the next look's seeds, with the baseline. The report says why each arm
// stopped; a restarted coordinator and a resubmission queue nothing more.
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/report/experiment_report.h"
#include "server/service/coordinator.h"
#include "tests/e2e/e2e_support.h"
#include "tests/e2e/worker_grid_fixture.h"

namespace smallem {
namespace {

std::string SequentialGrid(const std::string& data) {
  return absl::StrCat(
      "name: seq\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4, lr: 0.001, warmup: 0}\n"
      "budget: {steps: 30}\n"
      "seeds: {start: [1, 2, 3], max: 5, looks: [3, 5]}\n"
      "baseline: base\n"
      "variants:\n  base: {}\n  fast: {lr: 0.02}\n  near: {lr: 0.00101}\n");
}

class SequentialSeedsTest : public testing::WorkerGridTest {
 protected:
  std::map<std::string, int> RunsPerVariant(SqliteStore& store) {
    std::map<std::string, int> out;
    absl::StatusOr<std::vector<RunRecord>> runs = store.ListRuns(1);
    EXPECT_TRUE(runs.ok()) << runs.status();
    for (const RunRecord& r : *runs) {
      ++out[r.variant];
      EXPECT_EQ(r.status, RunStatus::kSucceeded) << r.variant << " seed " << r.seed << ": "
                                                 << r.last_error;
    }
    return out;
  }
  std::vector<std::string> Decisions(SqliteStore& store) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<LookDecisionRecord>> decisions = store.ListLookDecisions(1);
    EXPECT_TRUE(decisions.ok()) << decisions.status();
    for (const LookDecisionRecord& d : *decisions) {
      out.push_back(absl::StrCat(d.variant, "@", d.look, ":", d.outcome));
    }
    return out;
  }
};

TEST_F(SequentialSeedsTest, DecidedArmStopsAndTheOpenOneGetsTheNextLook) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = (*coordinator)->address();
  const std::string grid = SequentialGrid(data_dir_);
  Submit(address, grid);
  std::unique_ptr<ChildProcess> a = SpawnWorker(address, "a");
  std::unique_ptr<ChildProcess> b = SpawnWorker(address, "b");
  SqliteStore& store = (*coordinator)->store();
  // Done when nothing is queued or running: a look's runs are queued in the
  // transaction of the result that closes the look, so never in between.
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<RunCountsRecord> c = store.CountRuns(1);
        return c.ok() && c->total >= 9 && c->queued == 0 && c->leased == 0;
      },
      600, {a.get(), b.get()}));

  const std::map<std::string, int> expected = {{"base", 5}, {"fast", 3}, {"near", 5}};
  EXPECT_EQ(RunsPerVariant(store), expected);
  const std::vector<std::string> decisions = Decisions(store);
  ASSERT_EQ(decisions.size(), 3u) << absl::StrJoin(decisions, " ");
  EXPECT_EQ(decisions[0], "fast@1:better");
  EXPECT_EQ(decisions[1], "near@1:continue");
  EXPECT_TRUE(absl::StartsWith(decisions[2], "near@2:")) << decisions[2];
  EXPECT_FALSE(absl::EndsWith(decisions[2], "continue")) << decisions[2];
  EXPECT_EQ(store.CountRuns(1)->succeeded, 13);

  // The report: each arm on its own seeds (none pending), and why it stopped.
  absl::StatusOr<ExperimentRecord> e = store.GetExperiment(1);
  ASSERT_TRUE(e.ok());
  absl::StatusOr<RenderedReport> text =
      RenderExperimentReport(store, *e, ReportOptions{.format = ReportFormat::kTable});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_FALSE(absl::StrContains(text->text, "pending")) << text->text;
  std::map<std::string, std::string> lines;
  for (absl::string_view line : absl::StrSplit(text->text, '\n')) {
    for (const char* arm : {"base", "fast", "near"}) {
      if (absl::StartsWith(line, absl::StrCat("  ", arm, " "))) lines[arm] = std::string(line);
    }
  }
  EXPECT_TRUE(absl::StrContains(lines["fast"], "1/2        3  stopped at look 1 of 2: better"))
      << text->text;
  EXPECT_TRUE(absl::StrContains(lines["near"], "2/2        5  stopped at")) << text->text;
  EXPECT_TRUE(absl::StrContains(lines["base"], "-          5  the baseline")) << text->text;
  absl::StatusOr<RenderedReport> json =
      RenderExperimentReport(store, *e, ReportOptions{.format = ReportFormat::kJson});
  ASSERT_TRUE(json.ok()) << json.status();
  const nlohmann::json j = nlohmann::json::parse(json->text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json->text;
  ASSERT_EQ(j["sequential"]["decisions"].size(), 3u) << json->text;
  EXPECT_EQ(j["sequential"]["decisions"][0]["outcome"], "better");

  // A restarted coordinator decides nothing again; a resubmission queues
  // nothing.
  (*coordinator)->Shutdown();
  coordinator->reset();
  coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  Submit((*coordinator)->address(), grid);
  EXPECT_EQ(RunsPerVariant((*coordinator)->store()), expected);
  EXPECT_EQ(Decisions((*coordinator)->store()).size(), 3u);
  EXPECT_EQ((*coordinator)->store().CountRuns(1)->queued, 0);

  // `smallemctl status` ends with the same lines; `watch` of fast's run
  // prints them too.
  testing::CtlOutput status = testing::RunCtl({"status", "seq", "--coordinator",
                                               (*coordinator)->address()});
  ASSERT_EQ(status.exit.exit_code, 0) << status.out << status.last_error;
  EXPECT_TRUE(absl::StrContains(status.out, lines["fast"])) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, lines["near"])) << status.out;
  int64_t fast_run = 0;
  absl::StatusOr<std::vector<RunRecord>> runs = (*coordinator)->store().ListRuns(1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (const RunRecord& r : *runs) {
    if (r.variant == "fast" && fast_run == 0) fast_run = r.id;
  }
  testing::CtlOutput watch = testing::RunCtl(
      {"watch", absl::StrCat(fast_run), "--coordinator", (*coordinator)->address()});
  ASSERT_EQ(watch.exit.exit_code, 0) << watch.out << watch.last_error;
  EXPECT_TRUE(absl::StrContains(watch.out, lines["fast"])) << watch.out;
}

}  // namespace
}  // namespace smallem
