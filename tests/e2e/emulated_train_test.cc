// `smallemctl train --device cuda:0` end to end on the emulated H200
// (smallemctl-emulated: the same verbs linked with CudaBackend over
// emulator/): a tiny model trains for 20 steps with CUDA graphs,
// bf16 activations and matmuls, under AdamW and Muon, with experts and with
// latent attention, and its validation loss matches the CPU backend's
// within the bf16 tolerance. And `smallemctl run --devices cuda:0` with
// smallem-worker-emulated trains a tiny grid through the embedded
// coordinator, the worker daemon and its children on the emulated H200.
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
std::string EmulatedWorker() { return testing::BuildDir() + "/emulator/smallem-worker-emulated"; }

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

// Each variant's mean validation loss and device class, from `run`'s CSV
// report (columns variant, mean_val_nats_per_byte, device_class).
struct ReportRow {
  double val = 0;
  std::string device_class;
};
std::map<std::string, ReportRow> ReportRows(const std::string& csv) {
  std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  std::map<std::string, ReportRow> rows;
  std::vector<std::string> header;
  for (const std::string& line : lines) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (!cells.empty() && cells[0] == "experiment") header = cells;
    if (header.empty() || cells.size() != header.size() || cells[0] == "experiment") continue;
    std::map<std::string, std::string> cell;
    for (size_t i = 0; i < header.size(); ++i) cell[header[i]] = cells[i];
    rows[cell["variant"]] = {std::stod(cell["mean_val_nats_per_byte"]), cell["device_class"]};
  }
  return rows;
}

TEST(EmulatedTrainTest, RunTrainsAGridOnTheEmulatedDeviceThroughTheWorker) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  if (!std::ifstream(EmulatedWorker())) {
    GTEST_SKIP() << EmulatedWorker() << " not built (it needs -DSMALLEM_CUDA=ON and the emulator)";
  }
  testing::TempDir dir;
  const std::string data = dir.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir.path(), data).ok());
  // Heads of 32 (the CUDA attention takes 32, 64 and 128), two seeds each of
  // a baseline and a variant.
  const std::string grid = dir.Join("grid.yaml");
  testing::WriteFile(grid, absl::StrCat("name: emulated\ndata: ", data,
                                        "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 64, "
                                        "context: 32, batch: 4, eval_batches: 2}\n"
                                        "budget: {steps: 12}\nseeds: [1, 2]\nbaseline: v0\n"
                                        "variants:\n  v0: {lr: 0.001}\n  v1: {lr: 0.003}\n"));

  const std::string gpu_db = dir.Join("gpu.db");
  const testing::CtlOutput gpu =
      RunCtl({"run", grid, "--db", gpu_db, "--cache", dir.Join("gpu-cache"), "--devices", "cuda:0",
              "--worker-binary", EmulatedWorker(), "--format", "csv"});
  ASSERT_EQ(gpu.exit.exit_code, 0) << gpu.out << "\n" << gpu.last_error;
  EXPECT_NE(gpu.out.find("training on cuda:0"), std::string::npos) << gpu.out;
  // A head size without a CUDA kernel fails each run once, as a bad config
  // saying what to change, not as an engine error retried three times.
  const std::string bad_grid = dir.Join("heads16.yaml");
  testing::WriteFile(bad_grid, testing::TinyGridYaml("heads16", data, 1, 1, 12));
  const testing::CtlOutput bad = RunCtl({"run", bad_grid, "--db", dir.Join("bad.db"), "--cache",
                                         dir.Join("bad-cache"), "--devices", "cuda:0",
                                         "--worker-binary", EmulatedWorker()});
  EXPECT_NE(bad.exit.exit_code, 0) << bad.out;
  EXPECT_NE(bad.out.find("head size 16 has no CUDA attention kernel"), std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("attempt 2"), std::string::npos) << bad.out;
  EXPECT_NE(bad.last_error.find("--devices cuda:0"), std::string::npos)
      << "the command that retries it names the device: " << bad.last_error;

  const std::string cpu_db = dir.Join("cpu.db");
  const testing::CtlOutput cpu = RunCtl({"run", grid, "--db", cpu_db, "--cache",
                                         dir.Join("cpu-cache"), "--threads", "1", "--format", "csv"});
  ASSERT_EQ(cpu.exit.exit_code, 0) << cpu.out << "\n" << cpu.last_error;

  const std::map<std::string, ReportRow> on_gpu = ReportRows(gpu.out);
  const std::map<std::string, ReportRow> on_cpu = ReportRows(cpu.out);
  ASSERT_EQ(on_gpu.size(), 2u) << gpu.out;
  ASSERT_EQ(on_cpu.size(), 2u) << cpu.out;
  for (const auto& [variant, row] : on_cpu) {
    ASSERT_TRUE(on_gpu.contains(variant)) << variant;
    // Trained by children on the emulated H200, not on the CPU.
    EXPECT_EQ(on_gpu.at(variant).device_class, "NVIDIA H200 (emulated)") << variant;
    EXPECT_NE(row.device_class, on_gpu.at(variant).device_class) << variant;
    EXPECT_LT(std::abs(on_gpu.at(variant).val - row.val), kTolerance)
        << variant << ": cpu " << row.val << ", emulated cuda " << on_gpu.at(variant).val;
  }
}

}  // namespace
}  // namespace smallem
