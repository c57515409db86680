// ProfilingBackend: a Backend decorator that forwards every call to an inner
// backend and, while enabled, counts the calls and measures the wall time of
// each op family per training step — the table `smallemctl train --profile`
// prints (in the article series: 1,899 products per Muon step against 219
// for AdamW).
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

namespace smallem {

class ProfilingBackend final : public Backend {
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
  explicit ProfilingBackend(Backend& inner) : inner_(inner) {}

  Backend& inner() const { return inner_; }
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

  // Backend, forwarded.
  std::string Name() const override { return inner_.Name(); }
  std::string DeviceClass() const override { return inner_.DeviceClass(); }
  double PeakFlops() const override { return inner_.PeakFlops(); }
  bool Supports(Op op) const override { return inner_.Supports(op); }
  DType ActivationDType() const override { return inner_.ActivationDType(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return inner_.Allocate(bytes); }
  void Free(void* ptr) override { inner_.Free(ptr); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void Fill(Tensor t, float value) override;
  void Synchronize() override { inner_.Synchronize(); }
  size_t PeakMemoryBytes() const override { return inner_.PeakMemoryBytes(); }
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    return inner_.AllocateStaging(bytes);
  }
  void FreeStaging(void* ptr) override { inner_.FreeStaging(ptr); }
  void UploadStaged(void* dst, const void* src, size_t bytes) override;  // a copy
  void WaitStaged() override { inner_.WaitStaged(); }
  // SupportsGraphs() stays false: a profiled run is eager, since timing each
  // call synchronizes around it, which no captured step may do.

  void Matmul(const MatmulParams& p) override;
  void Add(const BinaryParams& p) override;
  void AddBackward(const BinaryBackwardParams& p) override;
  void Mul(const BinaryParams& p) override;
  void MulBackward(const BinaryBackwardParams& p) override;
  void GeluForward(const UnaryParams& p) override;
  void GeluBackward(const UnaryBackwardParams& p) override;
  void SiluForward(const UnaryParams& p) override;
  void SiluBackward(const UnaryBackwardParams& p) override;
  void SwiGluForward(const SwiGluParams& p) override;
  void SwiGluBackward(const SwiGluBackwardParams& p) override;
  void BiasAdd(const BiasAddParams& p) override;
  void BiasBackward(const BiasBackwardParams& p) override;
  void LayerNormForward(const NormParams& p) override;
  void LayerNormBackward(const NormBackwardParams& p) override;
  void RmsNormForward(const NormParams& p) override;
  void RmsNormBackward(const NormBackwardParams& p) override;
  void RopeForward(const RopeParams& p) override;
  void RopeBackward(const RopeBackwardParams& p) override;
  void AttentionForward(const AttentionParams& p) override;
  void AttentionBackward(const AttentionBackwardParams& p) override;
  void EmbeddingForward(const EmbeddingParams& p) override;
  void EmbeddingBackward(const EmbeddingBackwardParams& p) override;
  void CrossEntropyForward(const CrossEntropyParams& p) override;
  void CrossEntropyBackward(const CrossEntropyBackwardParams& p) override;
  void Sum(const ReduceParams& p) override;
  void SumSquares(const ReduceParams& p) override;
  void AdamW(const AdamWParams& p) override;
  void RowSumSquares(const RowReduceParams& p) override;
  void RowScale(const RowScaleParams& p) override;
  void GatherSequences(const GatherSequencesParams& p) override;

 private:
  using Clock = std::chrono::steady_clock;
  template <typename Call>
  void Timed(int family, Call&& call);

  Backend& inner_;
  bool enabled_ = true;
  bool in_optimizer_ = false;
  Clock::time_point step_start_ = Clock::now();
  Clock::time_point optimizer_start_;
  StepProfile current_;
  std::vector<StepProfile> steps_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_PROFILER_H_
