// smallemctl with multi-token prediction, through the real binary: train
// --mtp prints each depth's validation loss, the weights file generates and
// evaluates to the loss train printed, and impossible values exit 2 naming
// the key.
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

}  // namespace
}  // namespace smallem
