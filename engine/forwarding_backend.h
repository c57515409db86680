// ForwardingBackend: a Backend that forwards every call, unchanged, to a
// target backend (LevelDB's EnvWrapper). A decorator derives from it and
// overrides only what it changes: ProfilingBackend (engine/profiler.h) times
// the ops and copies; tests count or withhold calls. The ops' forwarding is
// generated from SMALLEM_BACKEND_OPS (engine/op_list.h), so a new op needs
// nothing here.
//
// Graphs are forwarded too: a target that records while `record` runs sees
// the calls `record` makes on the wrapper, forwarded. Thread-safety is the
// target's: one caller at a time.
#ifndef SMALLEM_ENGINE_FORWARDING_BACKEND_H_
#define SMALLEM_ENGINE_FORWARDING_BACKEND_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/op_list.h"
#include "engine/tensor.h"

namespace smallem {

class ForwardingBackend : public Backend {
 public:
  // `target` must outlive this.
  explicit ForwardingBackend(Backend& target) : target_(target) {}

  Backend& target() const { return target_; }

  std::string Name() const override { return target_.Name(); }
  std::string DeviceClass() const override { return target_.DeviceClass(); }
  double PeakFlops() const override { return target_.PeakFlops(); }
  DType ActivationDType() const override { return target_.ActivationDType(); }
  bool SavesAttentionProbs(int64_t batch, int64_t heads, int64_t time) const override {
    return target_.SavesAttentionProbs(batch, heads, time);
  }
  int64_t HeadLossChunkRows(int64_t rows, int64_t vocab, int64_t width) const override {
    return target_.HeadLossChunkRows(rows, vocab, width);
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override { return target_.Allocate(bytes); }
  void Free(void* ptr) override { target_.Free(ptr); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    target_.CopyToDevice(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    target_.CopyToHost(dst, src, bytes);
  }
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    target_.CopyOnDevice(dst, src, bytes);
  }
  void Fill(Tensor t, float value) override { target_.Fill(t, value); }
  void Synchronize() override { target_.Synchronize(); }
  size_t PeakMemoryBytes() const override { return target_.PeakMemoryBytes(); }

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    return target_.AllocateStaging(bytes);
  }
  void FreeStaging(void* ptr) override { target_.FreeStaging(ptr); }
  void UploadStaged(void* dst, const void* src, size_t bytes) override {
    target_.UploadStaged(dst, src, bytes);
  }
  void WaitStaged() override { target_.WaitStaged(); }

  bool SupportsGraphs() const override { return target_.SupportsGraphs(); }
  absl::StatusOr<int> CaptureGraph(const std::function<void()>& record) override {
    return target_.CaptureGraph(record);
  }
  void LaunchGraph(int graph) override { target_.LaunchGraph(graph); }
  void ReleaseGraphs() override { target_.ReleaseGraphs(); }

#define SMALLEM_FORWARD_OP(Method, Params, op) \
  void Method(const Params& p) override { target_.Method(p); }
  SMALLEM_BACKEND_OPS(SMALLEM_FORWARD_OP)
#undef SMALLEM_FORWARD_OP

 private:
  Backend& target_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_FORWARDING_BACKEND_H_
