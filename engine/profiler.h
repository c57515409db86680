// ProfilingBackend: a Backend decorator (a ForwardingBackend) that forwards
// every call to an inner backend and, while enabled, counts the calls and
// measures the wall time of each op family per training step — the table
// `smallemctl train --profile` prints (in the article series: 1,899 products
// per Muon step against 219 for AdamW).
//
// Each timed call is bracketed by inner.Synchronize(), so on a device that
// queues work the time is the op's own (and the run is slower while
// profiling); on the CPU Synchronize is free. Memory calls (Allocate, Free)
// are forwarded untimed; Fill and the three copies are families of their own.
//
// Steps: CreateOptimizer wraps the optimizer of a model whose backend is a
// ProfilingBackend, so each optimizer step is bracketed by
// BeginOptimizer()/EndOptimizer(); EndOptimizer also closes the training
// step (a step ends with its update). Calls after the last step (the final
// evaluation) belong to no step. Not thread-safe, like every Backend.
#ifndef SMALLEM_ENGINE_PROFILER_H_
#define SMALLEM_ENGINE_PROFILER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/forwarding_backend.h"
#include "engine/op_list.h"

namespace smallem {

class ProfilingBackend final : public ForwardingBackend {
 public:
  // Op families: one per Op, then Fill, then copies (to/from/on the device).
  static constexpr int kFillFamily = kOpCount;
  static constexpr int kCopyFamily = kOpCount + 1;
  static constexpr int kFamilyCount = kOpCount + 2;
  static const char* FamilyName(int family);

  struct Family {
    int64_t calls = 0;
    double seconds = 0;
    int64_t optimizer_calls = 0;  // of `calls`, inside the optimizer step
    double optimizer_seconds = 0;
  };
  struct StepProfile {
    double seconds = 0;            // wall time since the previous step ended
    double optimizer_seconds = 0;  // wall time of the optimizer step
    std::array<Family, kFamilyCount> families{};
  };

  // `inner` must outlive this. Profiling starts enabled.
  explicit ProfilingBackend(Backend& inner) : ForwardingBackend(inner) {}

  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  // Starts the clock of the first step and drops what was counted before
  // (model set-up). Called when the profiled optimizer is created.
  void BeginSteps();
  void BeginOptimizer();
  // Ends the optimizer step and with it the training step.
  void EndOptimizer();
  const std::vector<StepProfile>& steps() const { return steps_; }

  // Mean per step over steps [skip, N) (all of them when N <= skip): a
  // header with step, optimizer and matmul totals, then one row per op
  // family that was called, slowest first. "" when no step was recorded.
  std::string FormatTable(int64_t skip = 1) const;

  // Timed; everything else is forwarded untimed.
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void UploadStaged(void* dst, const void* src, size_t bytes) override;  // a copy
  void Fill(Tensor t, float value) override;
  SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_OP_OVERRIDE)

  // No graphs: a profiled run is eager, since timing each call synchronizes
  // around it, which no captured step may do.
  bool SupportsGraphs() const override { return false; }

 private:
  using Clock = std::chrono::steady_clock;
  template <typename Call>
  void Timed(int family, Call&& call);

  bool enabled_ = true;
  bool in_optimizer_ = false;
  Clock::time_point step_start_ = Clock::now();
  Clock::time_point optimizer_start_;
  StepProfile current_;
  std::vector<StepProfile> steps_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_PROFILER_H_
