// Backend's default implementations: plain host memory for staging and no
// graphs. Also the AdamW step scalars every backend shares.
#include "engine/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace smallem {
namespace {

constexpr size_t kStagingAlignment = 64;

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

}  // namespace smallem
