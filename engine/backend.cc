// Backend's default implementations: plain host memory for staging, no
// graphs, and the optimizer row ops as a round trip through host memory
// around the CPU reference (engine/cpu/row_*.cc), so a backend without its
// own kernels is slow but correct. Also the AdamW step scalars every
// backend shares.
#include "engine/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "engine/cpu/cpu_util.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

constexpr size_t kStagingAlignment = 64;

std::vector<float> HostCopy(Backend& be, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  if (!t.empty()) be.CopyToHost(host.data(), t.data, t.bytes());
  return host;
}

}  // namespace

AdamWStepScalars MakeAdamWStepScalars(float lr, float beta1, float beta2, int64_t step) {
  CHECK_GE(step, 1) << "adamw: step is 1-based";
  // In double, then rounded once: every backend applies the same f32 values.
  const auto t = static_cast<double>(step);
  return AdamWStepScalars{
      .lr = lr,
      .correction1 = static_cast<float>(1.0 / (1.0 - std::pow(double{beta1}, t))),
      .correction2 = static_cast<float>(1.0 / (1.0 - std::pow(double{beta2}, t)))};
}

absl::StatusOr<void*> Backend::AllocateStaging(size_t bytes) {
  const size_t rounded =
      std::max<size_t>(1, (bytes + kStagingAlignment - 1) / kStagingAlignment) * kStagingAlignment;
  void* ptr = std::aligned_alloc(kStagingAlignment, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Name(), ": out of host memory allocating ", bytes, " bytes of staging"));
  }
  std::memset(ptr, 0, rounded);
  return ptr;
}

void Backend::FreeStaging(void* ptr) { std::free(ptr); }

absl::StatusOr<int> Backend::CaptureGraph(const std::function<void()>& record) {
  CHECK(false) << Name() << " has no graphs (SupportsGraphs() is false)";
  return -1;
}

void Backend::LaunchGraph(int graph) {
  CHECK(false) << Name() << " has no graphs (SupportsGraphs() is false)";
}

void Backend::RowSumSquares(const RowReduceParams& p) {
  CheckRowSumSquares(p);
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  const std::vector<float> in = HostCopy(*this, p.in);
  std::vector<float> out = p.beta == 0.0f ? std::vector<float>(rows) : HostCopy(*this, p.out);
  cpu::RowSumSquares(in.data(), rows, cols, p.alpha, p.beta, out.data(), 1);
  CopyToDevice(p.out.data, out.data(), p.out.bytes());
}

void Backend::RowScale(const RowScaleParams& p) {
  CheckRowScale(p);
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  const std::vector<float> in = HostCopy(*this, p.in);
  const std::vector<float> numer = HostCopy(*this, p.numer);
  const std::vector<float> denom = HostCopy(*this, p.denom);
  const std::vector<float> scale = HostCopy(*this, p.scale);
  const float alpha = p.scale.empty() ? p.alpha : p.alpha * scale[0];
  std::vector<float> out(in.size());
  cpu::RowScale(in.data(), rows, cols, p.numer.empty() ? nullptr : numer.data(),
                p.denom.empty() ? nullptr : denom.data(), alpha, p.eps, out.data(), 1);
  CopyToDevice(p.out.data, out.data(), p.out.bytes());
}

}  // namespace smallem
