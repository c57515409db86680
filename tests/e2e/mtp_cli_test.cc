// smallemctl with multi-token prediction, through the real binary: train
// --mtp prints each depth's validation loss, the weights file generates and
// evaluates to the loss train printed, and impossible values exit 2 naming
// the key.
#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/store/sqlite_store.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;

std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  size_t at = text.rfind("\n" + prefix);
  if (at != std::string::npos) ++at;
  else if (text.rfind(prefix, 0) == 0) at = 0;
  else return "";
  return text.substr(at, text.find('\n', at) - at);
}

TEST(MtpCliTest, TrainWithMtpReportsEachDepthAndItsFileGeneratesAndEvaluates) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir.path(), data).ok());
  const std::string run = dir.Join("run");
  testing::CtlOutput train =
      RunCtl({"train", "--data", data, "--arch", "modern", "--layers", "1", "--heads", "2",
              "--embed", "32", "--context", "32", "--batch", "4", "--steps", "10", "--mtp", "2",
              "--mtp-weight", "0.5", "--eval-batches", "1", "--threads", "2", "--out", run});
  ASSERT_EQ(train.exit.exit_code, 0) << train.out << "\n" << train.last_error;
  const std::string depths = LineStartingWith(train.out, "mtp depths:");
  EXPECT_NE(depths, "") << train.out;
  EXPECT_NE(depths.find("nats/token"), std::string::npos) << depths;
  std::ifstream in(run + "/result.json");
  const nlohmann::json result = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["val_mtp_nats_per_token"].size(), 2u);
  EXPECT_EQ(result["config"]["mtp"], 2);
  EXPECT_EQ(result["config"]["mtp_weight"], 0.5);

  // The file evaluates to the next-token loss train printed, and generates.
  testing::CtlOutput eval =
      RunCtl({"eval", "--weights", run + "/weights.safetensors", "--data", data, "--threads", "2"});
  ASSERT_EQ(eval.exit.exit_code, 0) << eval.out << "\n" << eval.last_error;
  EXPECT_EQ(LineStartingWith(eval.out, "validation:"), LineStartingWith(train.out, "validation:"));
  testing::CtlOutput generate = RunCtl(
      {"generate", "--weights", run + "/weights.safetensors", "--prompt", "the ", "--tokens", "8"});
  EXPECT_EQ(generate.exit.exit_code, 0) << generate.out << "\n" << generate.last_error;

  // Impossible values: exit 2, the message naming the key.
  for (const auto& [args, key] :
       {std::pair{std::vector<std::string>{"--mtp", "-1"}, "\"mtp\""},
        {std::vector<std::string>{"--mtp", "32"}, "\"mtp\""},
        {std::vector<std::string>{"--mtp", "1", "--mtp-weight", "-0.5"}, "\"mtp_weight\""}}) {
    std::vector<std::string> command = {"train", "--data", data, "--context", "32", "--steps", "1"};
    command.insert(command.end(), args.begin(), args.end());
    testing::CtlOutput bad = RunCtl(command);
    EXPECT_EQ(bad.exit.exit_code, 2) << args[1];
    EXPECT_NE(bad.last_error.find(key), std::string::npos) << bad.last_error;
  }
}

// "1,234": what the report's params cells look like.
std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A grid with an MTP variant: its report says what training adds to the
// params column, and every run's generation speed was measured inside its
// context (past it, learned positions re-encode the window per token).
TEST(MtpCliTest, TheReportCountsTheParametersOnlyTrainingUses) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  testing::TempDir dir;
  testing::CtlOutput run = testing::RunTinyGrid(dir, "depths", "", 20, "dense",
                                                "  dense: {}\n  mtp: {mtp: 2}\n");
  ASSERT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  const std::string db = dir.Join("smallem.db");
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::OpenReadOnly(db);
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t params = 0, mtp_params = 0;
  absl::StatusOr<std::vector<ResultRecord>> results = (*store)->ListResults(1);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  for (const ResultRecord& r : *results) {
    const nlohmann::json j = nlohmann::json::parse(r.result_json);
    const int64_t context = j["config"]["context"].get<int64_t>();
    EXPECT_EQ(j["generation_tokens"], std::min<int64_t>(64, context - 1)) << r.result_json;
    if (j.contains("mtp_params")) {
      params = j["params"].get<int64_t>();
      mtp_params = j["mtp_params"].get<int64_t>();
    }
  }
  ASSERT_GT(mtp_params, 0);
  store->reset();

  testing::CtlOutput report = RunCtl({"report", "depths", "--db", db});
  ASSERT_EQ(report.exit.exit_code, 0) << report.last_error;
  EXPECT_NE(report.out.find("note: mtp trains " + Grouped(params + mtp_params) +
                            " parameters: the params column's " + Grouped(params) +
                            ", which generate, and " + Grouped(mtp_params) +
                            " in its 2 multi-token-prediction depths, which only training uses"),
            std::string::npos)
      << report.out;
  EXPECT_EQ(report.out.find("note: dense trains"), std::string::npos) << report.out;
}

}  // namespace
}  // namespace smallem
