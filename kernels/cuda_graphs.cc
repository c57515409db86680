// CudaBackend's graphs (Backend::CaptureGraph): the stream captured in
// thread-local mode while `record` runs, the host bytes of recorded copies
// kept in page-locked snapshot memory, and the executable graphs.
#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"

namespace smallem {

const void* CudaBackend::Snapshot(const void* src, size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  snapshot_asked_ += rounded;
  if (snapshot_short_ || snapshots_.empty() ||
      snapshot_used_ + rounded > snapshots_.back().size) {
    snapshot_short_ = true;
    return nullptr;
  }
  char* dst = snapshots_.back().data + snapshot_used_;
  std::memcpy(dst, src, bytes);
  snapshot_used_ += rounded;
  return dst;
}

absl::StatusOr<int> CudaBackend::CaptureGraph(const std::function<void()>& record) {
  CHECK(!capturing_) << "CaptureGraph inside a capture";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const size_t snapshot_start = snapshot_used_;
    snapshot_asked_ = 0;
    snapshot_short_ = false;
    CheckCuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
              "CaptureGraph: begin");
    capturing_ = true;
    record();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    CheckCuda(cudaStreamEndCapture(stream_, &graph),
              "CaptureGraph: a call of the step broke the capture");
    if (snapshot_short_) {
      // Host bytes copied during the capture did not fit: record the step
      // again with a block that holds them all (the old blocks stay with
      // the graphs that use them).
      cudaGraphDestroy(graph);
      snapshot_used_ = snapshot_start;
      const size_t size = std::max<size_t>(snapshot_asked_, size_t{64} << 10);
      void* block = nullptr;
      if (cudaError_t e = cudaHostAlloc(&block, size, cudaHostAllocDefault); e != cudaSuccess) {
        cudaGetLastError();
        return absl::ResourceExhaustedError(absl::StrCat(
            Name(), ": cannot allocate ", size, " bytes of page-locked memory for a graph (",
            cudaGetErrorString(e), ")"));
      }
      ++allocations_made_;
      snapshots_.push_back(SnapshotBlock{static_cast<char*>(block), size});
      snapshot_used_ = 0;
      continue;
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      snapshot_used_ = snapshot_start;
      return absl::ResourceExhaustedError(absl::StrCat(
          Name(), ": instantiating the captured step failed with ", cudaGetErrorName(e), " (",
          cudaGetErrorString(e), "); set SMALLEM_CUDA_GRAPHS=0 to train without graphs"));
    }
    graphs_.push_back(exec);
    return static_cast<int>(graphs_.size()) - 1;
  }
  CHECK(false) << "CaptureGraph: the step copied more host bytes when recorded again; "
                  "`record` must make the same calls every time";
  return -1;
}

void CudaBackend::LaunchGraph(int graph) {
  CHECK(graph >= 0 && graph < static_cast<int>(graphs_.size()))
      << "LaunchGraph: no graph " << graph << " (" << graphs_.size() << " captured)";
  CheckCuda(cudaGraphLaunch(graphs_[graph], stream_), "LaunchGraph");
}

void CudaBackend::ReleaseGraphs() {
  CheckNotCapturing("ReleaseGraphs");
  if (graphs_.empty() && snapshots_.empty()) return;
  CheckCuda(cudaStreamSynchronize(stream_), "ReleaseGraphs (a queued op failed)");
  for (cudaGraphExec_t graph : graphs_) CheckCuda(cudaGraphExecDestroy(graph), "ReleaseGraphs");
  graphs_.clear();
  for (const SnapshotBlock& block : snapshots_) {
    CheckCuda(cudaFreeHost(block.data), "ReleaseGraphs: snapshot memory");
  }
  snapshots_.clear();
  snapshot_used_ = 0;
}

}  // namespace smallem
