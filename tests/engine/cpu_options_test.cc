// CpuBackend's options: the names each binary parses at its edge, the errors
// for a name the build lacks, and every GEMM library and attention kernel the
// build has, built side by side in one process and trained on the same
// batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/check.h"
#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/model/model.h"
#include "engine/train/trainer.h"
#include "tests/engine/model_test_util.h"

namespace smallem {
namespace {

using testing::Randomize;
using testing::ToHost;
using testing::Tokens;

// Sets an environment variable for one scope and puts back what was there.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CpuOptionsTest, GemmNamesParse) {
  EXPECT_EQ(*cpu::ParseGemmChoice("auto"), std::nullopt);
  EXPECT_EQ(*cpu::ParseGemmChoice("loop"), cpu::GemmLibrary::kLoop);
  const absl::StatusOr<cpu::GemmChoice> mkl = cpu::ParseGemmChoice("mkl");
  ASSERT_FALSE(mkl.ok());
  EXPECT_EQ(mkl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mkl.status().message().find("\"mkl\" is not a GEMM library this build has: auto, "),
            0u)
      << mkl.status();
  EXPECT_TRUE(std::string(mkl.status().message()).ends_with("loop")) << mkl.status();
}

TEST(CpuOptionsTest, AttentionNamesParse) {
  EXPECT_EQ(*CpuBackend::ParseAttentionKernel("auto"), std::nullopt);
  EXPECT_EQ(*CpuBackend::ParseAttentionKernel("blas"), CpuBackend::AttentionKernel::kBlas);
  const auto flash = CpuBackend::ParseAttentionKernel("flash");
  ASSERT_FALSE(flash.ok());
  EXPECT_EQ(flash.status().message().find("\"flash\" is not an attention kernel this build "
                                          "has: auto, "),
            0u)
      << flash.status();
}

// A bad value is an error the binary reports at start-up, naming the
// variable, and no longer an exit inside the engine.
TEST(CpuOptionsTest, TheEnvironmentIsReadIntoAStatus) {
  {
    ScopedEnvironment gemm("SMALLEM_GEMM", "mkl");
    const absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(3);
    ASSERT_FALSE(options.ok());
    EXPECT_TRUE(std::string(options.status().message()).starts_with("SMALLEM_GEMM: \"mkl\" is not"))
        << options.status();
  }
  {
    ScopedEnvironment attention("SMALLEM_ATTENTION", "flash");
    const absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(3);
    ASSERT_FALSE(options.ok());
    EXPECT_TRUE(std::string(options.status().message()).starts_with("SMALLEM_ATTENTION: \"flash\" is not"))
        << options.status();
  }
  ScopedEnvironment gemm("SMALLEM_GEMM", "loop");
  ScopedEnvironment attention("SMALLEM_ATTENTION", "blas");
  const absl::StatusOr<CpuBackend::Options> options = CpuBackend::OptionsFromEnvironment(3);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->threads, 3);
  EXPECT_EQ(options->gemm, cpu::GemmLibrary::kLoop);
  EXPECT_EQ(options->attention, CpuBackend::AttentionKernel::kBlas);
}

TEST(CpuOptionsTest, CudaGraphsAreOffOnlyForZero) {
  {
    ScopedEnvironment graphs("SMALLEM_CUDA_GRAPHS", "0");
    EXPECT_FALSE(CudaGraphsFromEnvironment());
  }
  ScopedEnvironment graphs("SMALLEM_CUDA_GRAPHS", "1");
  EXPECT_TRUE(CudaGraphsFromEnvironment());
}

// The mean loss of one batch and the gradient of every parameter.
struct LossAndGradient {
  float loss = 0;
  std::vector<float> grad;
};

LossAndGradient TrainOnce(CpuBackend& be) {
  const ModelConfig config{.vocab = 50, .context = 64, .layers = 2, .heads = 2, .embed = 32,
                           .architecture = Architecture::Gpt2()};
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(config, be);
  CHECK(model.ok()) << model.status();
  Randomize(**model, /*seed=*/1, /*scale=*/0.1);
  std::vector<int32_t> in(2 * 64), tg(2 * 64);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int32_t>((7 * i + 3) % 50);
    tg[i] = static_cast<int32_t>((11 * i + 5) % 50);
  }
  Arena arena(be, 1 << 22);
  Tape tape(be, arena);
  (*model)->ZeroGrad();
  const Var loss =
      Mean(tape, (*model)->Losses(tape, Tokens(arena, be, in), Tokens(arena, be, tg), 2, 64));
  LossAndGradient out;
  be.CopyToHost(&out.loss, tape.value(loss).data, sizeof(float));
  tape.Backward(loss);
  out.grad = ToHost(be, (*model)->grads());
  return out;
}

// Every library and kernel the build has, in one process: each backend says
// what it runs, and all of them give the same loss and gradients to f32
// rounding.
TEST(CpuOptionsTest, EveryLibraryAndKernelTrainsTheSameStepInOneProcess) {
  std::vector<CpuBackend::Options> choices;
  for (const char* gemm : {"loop", "openblas", "onednn"}) {
    const absl::StatusOr<cpu::GemmChoice> library = cpu::ParseGemmChoice(gemm);
    if (!library.ok()) continue;  // not in this build
    for (const char* kernel : {"blas", "tiles"}) {
      const auto attention = CpuBackend::ParseAttentionKernel(kernel);
      if (!attention.ok()) continue;
      choices.push_back({.threads = 2, .gemm = *library, .attention = *attention});
    }
  }
  ASSERT_GE(choices.size(), 1u);
  std::optional<LossAndGradient> first;
  for (const CpuBackend::Options& options : choices) {
    CpuBackend be(options);
    const std::string what = be.GemmLibrary() + " products, " + be.AttentionKernelName() +
                             " attention";
    EXPECT_EQ(be.GemmLibrary(), cpu::GemmLibraryName(*options.gemm)) << what;
    EXPECT_EQ(be.AttentionKernelName(),
              *options.attention == CpuBackend::AttentionKernel::kTiles ? "tiles" : "blas");
    const LossAndGradient run = TrainOnce(be);
    if (!first) {
      first = run;
      continue;
    }
    EXPECT_NEAR(run.loss, first->loss, 1e-5) << what;
    ASSERT_EQ(run.grad.size(), first->grad.size());
    double worst = 0;
    for (size_t i = 0; i < run.grad.size(); ++i) {
      worst = std::max(worst, std::abs(double{run.grad[i]} - first->grad[i]));
    }
    EXPECT_LT(worst, 1e-5) << what;
  }
}

}  // namespace
}  // namespace smallem
