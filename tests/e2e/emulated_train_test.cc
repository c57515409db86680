// `smallemctl train --device cuda:0` end to end on the emulated H200
// (smallemctl-emulated: the same verbs linked with CudaBackend over
// emulator/): a tiny model trains for 20 steps with CUDA graphs,
// bf16 activations and matmuls, under AdamW and Muon, with experts and with
// latent attention, and its validation loss matches the CPU backend's
// within the bf16 tolerance.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/e2e_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::RunCtl;

// bf16 activations and matmuls against f32 on the CPU, 20 steps of a tiny
// model: the measured differences are at most 0.0005 nats/byte (MoE; the
// others 0.0001 or less, docs/gpu-notes.md), a real GPU's other summation
// orders get ten times that.
constexpr double kTolerance = 0.005;

std::string EmulatedCtl() { return testing::BuildDir() + "/emulator/smallemctl-emulated"; }

nlohmann::json Train(const std::vector<std::string>& variant, const std::string& device,
                     const std::string& data, const std::string& out) {
  std::vector<std::string> args = {"train", "--data", data, "--arch", "modern", "--layers", "1",
                                   "--heads", "2", "--embed", "64", "--context", "32", "--batch",
                                   "4", "--steps", "20", "--eval-batches", "1", "--threads", "2",
                                   "--device", device, "--out", out};
  args.insert(args.end(), variant.begin(), variant.end());
  const testing::CtlOutput run =
      RunCtl(args, device == "cpu" ? testing::CtlBinary() : EmulatedCtl());
  EXPECT_EQ(run.exit.exit_code, 0) << run.out << "\n" << run.last_error;
  std::ifstream in(out + "/result.json");
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(EmulatedTrainTest, TrainOnTheEmulatedCudaBackendMatchesTheCpu) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  if (!std::ifstream(EmulatedCtl())) {
    GTEST_SKIP() << EmulatedCtl() << " not built (it needs -DSMALLEM_CUDA=ON and the emulator)";
  }
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir.path(), data).ok());
  const std::vector<std::vector<std::string>> variants = {
      {"--optimizer", "adamw"},
      {"--optimizer", "muon"},
      {"--experts", "4", "--top-k", "2"},
      {"--attention", "latent", "--kv-latent", "16"},
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    const std::string what = variants[i][0] + " " + variants[i][1];
    const nlohmann::json cpu = Train(variants[i], "cpu", data, dir.Join("cpu" + std::to_string(i)));
    const nlohmann::json gpu =
        Train(variants[i], "cuda:0", data, dir.Join("gpu" + std::to_string(i)));
    ASSERT_TRUE(cpu.is_object() && gpu.is_object()) << what;
    EXPECT_EQ(gpu["cuda_graphs"], true) << what;
    const double cpu_val = cpu["val_nats_per_byte"].get<double>();
    const double gpu_val = gpu["val_nats_per_byte"].get<double>();
    EXPECT_LT(std::abs(gpu_val - cpu_val), kTolerance)
        << what << ": cpu " << cpu_val << ", emulated cuda " << gpu_val;
    // Both start from the same weights (the seed), so a backend whose
    // updates did nothing would be far from the CPU's trained model.
    std::printf("%s: cpu %.4f, emulated cuda %.4f nats/byte (|diff| %.4f)\n", what.c_str(),
                cpu_val, gpu_val, std::abs(gpu_val - cpu_val));
  }
}

}  // namespace
}  // namespace smallem
