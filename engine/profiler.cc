#include "engine/profiler.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace smallem {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

const char* ProfilingBackend::FamilyName(int family) {
  if (family == kFillFamily) return "fill";
  if (family == kCopyFamily) return "copy";
  return OpName(static_cast<Op>(family));
}

template <typename Call>
void ProfilingBackend::Timed(int family, Call&& call) {
  if (!enabled_) {
    call();
    return;
  }
  // Drain queued work first so the interval holds this call alone.
  target().Synchronize();
  const Clock::time_point start = Clock::now();
  call();
  target().Synchronize();
  const double seconds = Seconds(Clock::now() - start);
  Family& f = current_.families[family];
  ++f.calls;
  f.seconds += seconds;
  if (in_optimizer_) {
    ++f.optimizer_calls;
    f.optimizer_seconds += seconds;
  }
}

void ProfilingBackend::BeginSteps() {
  target().Synchronize();
  current_ = StepProfile{};
  steps_.clear();
  step_start_ = Clock::now();
}

void ProfilingBackend::BeginOptimizer() {
  target().Synchronize();
  in_optimizer_ = true;
  optimizer_start_ = Clock::now();
}

void ProfilingBackend::EndOptimizer() {
  target().Synchronize();
  const Clock::time_point now = Clock::now();
  in_optimizer_ = false;
  current_.optimizer_seconds = Seconds(now - optimizer_start_);
  current_.seconds = Seconds(now - step_start_);
  if (enabled_) steps_.push_back(current_);
  current_ = StepProfile{};
  step_start_ = now;
}

std::string ProfilingBackend::FormatTable(int64_t skip) const {
  const auto total = static_cast<int64_t>(steps_.size());
  if (total == 0) return "";
  const int64_t first = total > skip ? skip : 0;
  const double count = static_cast<double>(total - first);
  StepProfile mean;
  for (int64_t i = first; i < total; ++i) {
    const StepProfile& s = steps_[i];
    mean.seconds += s.seconds / count;
    mean.optimizer_seconds += s.optimizer_seconds / count;
    for (int f = 0; f < kFamilyCount; ++f) {
      mean.families[f].seconds += s.families[f].seconds / count;
      mean.families[f].optimizer_seconds += s.families[f].optimizer_seconds / count;
      mean.families[f].calls += s.families[f].calls;
      mean.families[f].optimizer_calls += s.families[f].optimizer_calls;
    }
  }
  const std::string range =
      first == 0 ? absl::StrCat("all ", total, " steps")
                 : absl::StrCat("steps ", first + 1, "-", total, " (step 1 holds the warm-up)");
  std::string out = absl::StrFormat("profile on %s: mean per step over %s\n",
                                    target().DeviceClass(), range);
  const Family& mm = mean.families[static_cast<int>(Op::kMatmul)];
  absl::StrAppendFormat(&out, "  step %10.2f ms   optimizer %8.2f ms   matmul %7.1f calls %9.2f ms"
                              " (optimizer: %.1f calls, %.2f ms)\n",
                        1e3 * mean.seconds, 1e3 * mean.optimizer_seconds, mm.calls / count,
                        1e3 * mm.seconds, mm.optimizer_calls / count, 1e3 * mm.optimizer_seconds);
  absl::StrAppendFormat(&out, "  %-16s %10s %10s %16s %14s\n", "op family", "calls", "ms",
                        "optimizer calls", "optimizer ms");
  std::vector<int> order(kFamilyCount);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return mean.families[a].seconds > mean.families[b].seconds;
  });
  for (int f : order) {
    const Family& fam = mean.families[f];
    if (fam.calls == 0) continue;
    absl::StrAppendFormat(&out, "  %-16s %10.1f %10.3f %16.1f %14.3f\n", FamilyName(f),
                          fam.calls / count, 1e3 * fam.seconds, fam.optimizer_calls / count,
                          1e3 * fam.optimizer_seconds);
  }
  return out;
}

void ProfilingBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  Timed(kCopyFamily, [&] { target().CopyToDevice(dst, src, bytes); });
}
void ProfilingBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  Timed(kCopyFamily, [&] { target().CopyToHost(dst, src, bytes); });
}
void ProfilingBackend::UploadStaged(void* dst, const void* src, size_t bytes) {
  Timed(kCopyFamily, [&] { target().UploadStaged(dst, src, bytes); });
}
void ProfilingBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  Timed(kCopyFamily, [&] { target().CopyOnDevice(dst, src, bytes); });
}
void ProfilingBackend::Fill(Tensor t, float value) {
  Timed(kFillFamily, [&] { target().Fill(t, value); });
}

// Every op: its family is its Op, forward and backward alike.
#define SMALLEM_PROFILED_OP(Method, Params, op)                                 \
  void ProfilingBackend::Method(const Params& p) {                              \
    Timed(static_cast<int>(Op::op), [&] { ForwardingBackend::Method(p); });     \
  }
SMALLEM_BACKEND_OPS(SMALLEM_PROFILED_OP)
#undef SMALLEM_PROFILED_OP

}  // namespace smallem
