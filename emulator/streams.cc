// The emulated device's streams, events, stream capture and graphs.
//
// Work is asynchronous as on the device: a launch, an async copy or set, an
// event record is queued and runs at the next synchronizing call
// (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a
// synchronous copy, cudaFree), so a host read of a result before its stream
// is synchronized sees the old bytes, and a host write to page-locked memory
// that a queued copy will read changes what the copy reads. Queued work runs
// in the order it was queued, across streams (one legal order of the
// device's; the emulator does not try others).
//
// A stream being captured (cudaStreamCaptureModeThreadLocal, the mode the
// backend uses) records its work into a graph instead; a call that must
// not be made during a capture (a synchronization, an allocation, a
// synchronous copy) fails with cudaErrorStreamCaptureUnsupported and
// invalidates the capture, whose end then fails with
// cudaErrorStreamCaptureInvalidated. A graph launch queues the recorded
// work again: a replay reads the host and device memory the recorded calls
// named, as they are when it runs.
#include <memory>
#include <utility>
#include <vector>

#include "emulator/state.h"

struct CUgraph_st {
  std::vector<smallem::emu::Work> nodes;
};
struct CUgraphExec_st {
  std::vector<smallem::emu::Work> nodes;
};
struct CUstream_st {
  unsigned flags = 0;
  std::unique_ptr<CUgraph_st> capture;  // non-null while capturing
  bool invalidated = false;
};
struct CUevent_st {
  unsigned flags = 0;
};

namespace smallem::emu {
namespace {

std::vector<Work>& Queue() {
  static auto* queue = new std::vector<Work>;
  return *queue;
}

// The streams this thread is capturing (the backend captures one).
std::vector<cudaStream_t>& Capturing() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

}  // namespace

bool IsCapturing(cudaStream_t stream) { return stream != nullptr && stream->capture != nullptr; }

void Enqueue(cudaStream_t stream, Work work) {
  if (IsCapturing(stream)) {
    stream->capture->nodes.push_back(std::move(work));
  } else {
    Queue().push_back(std::move(work));
  }
}

cudaError_t Drain() {
  // Work may not queue more work, but take the queue first all the same.
  std::vector<Work> work = std::move(Queue());
  Queue().clear();
  for (const Work& w : work) {
    if (State().sticky != cudaSuccess) break;
    w();
  }
  return State().sticky;
}

void DropQueued() { Queue().clear(); }

cudaError_t RefuseWhileCapturing() {
  if (Capturing().empty()) return cudaSuccess;
  for (cudaStream_t stream : Capturing()) stream->invalidated = true;
  return Record(cudaErrorStreamCaptureUnsupported);
}

}  // namespace smallem::emu

using smallem::emu::Capturing;
using smallem::emu::Drain;
using smallem::emu::Enqueue;
using smallem::emu::Record;
using smallem::emu::RefuseWhileCapturing;

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  *stream = new CUstream_st;
  (*stream)->flags = flags;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream->capture != nullptr) return Record(cudaErrorInvalidValue);
  delete stream;  // its queued work still runs, as on the device
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (smallem::emu::IsCapturing(stream)) {
    stream->invalidated = true;
    return Record(cudaErrorStreamCaptureUnsupported);
  }
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  return Drain();
}
cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  return Drain();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  // The legacy default stream cannot be captured; only thread-local mode is
  // modelled (the only one the backend uses).
  if (stream == nullptr || stream->capture != nullptr || mode != cudaStreamCaptureModeThreadLocal) {
    return Record(stream == nullptr ? cudaErrorStreamCaptureUnsupported : cudaErrorInvalidValue);
  }
  stream->capture = std::make_unique<CUgraph_st>();
  stream->invalidated = false;
  Capturing().push_back(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!smallem::emu::IsCapturing(stream)) return Record(cudaErrorIllegalState);
  std::erase(Capturing(), stream);
  std::unique_ptr<CUgraph_st> captured = std::move(stream->capture);
  if (stream->invalidated) {
    *graph = nullptr;
    return Record(cudaErrorStreamCaptureInvalidated);
  }
  *graph = captured.release();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (graph == nullptr || flags != 0) return Record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return Record(cudaErrorInvalidResourceHandle);
  if (smallem::emu::State().sticky != cudaSuccess) return smallem::emu::State().sticky;
  for (const smallem::emu::Work& node : exec->nodes) Enqueue(stream, node);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st{flags};
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return cudaEventRecordWithFlags(event, stream, cudaEventRecordDefault);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned flags) {
  if (event == nullptr) return Record(cudaErrorInvalidResourceHandle);
  // Outside a capture, or as an external node inside one, the record is
  // work of its own; inside a capture without the flag it only orders the
  // graph, which runs in order here anyway. Waiting for an event drains the
  // whole queue, so the record itself need do nothing.
  if (smallem::emu::IsCapturing(stream) && flags != cudaEventRecordExternal) return cudaSuccess;
  Enqueue(stream, [] {});
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return Record(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = RefuseWhileCapturing(); e != cudaSuccess) return e;
  return Drain();
}
