// The emulated runtime's streams, events, capture and graphs against the
// CUDA runtime's documented behaviour, with hand-computed cases: work is
// queued and runs at a synchronizing call, copies follow the driver's
// pageable/page-locked rules, a capture records and a replay re-reads.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "emulator/device.h"
#include "kernels/launch.cuh"
#include "tests/emulator/emulated_device.h"

namespace smallem::emu {
namespace {

class EmulatedStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetDevice();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamDestroy(stream_);
    ResetDevice();
  }
  cudaStream_t stream_ = nullptr;
};

__global__ void AddTo(float* x, const float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += y[i];
}

TEST_F(EmulatedStreamsTest, AHostReadBeforeTheStreamIsSynchronizedSeesTheOldBytes) {
  DeviceBuffer<float> device(std::vector<float>{1, 2, 3, 4});
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 4 * sizeof(float),
                          cudaHostAllocDefault),
            cudaSuccess);
  for (int i = 0; i < 4; ++i) pinned[i] = -1;
  SMALLEM_LAUNCH(AddTo, 1, 4, 0, stream_)(device.get(), device.get(), 4);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device.get(), 4 * sizeof(float), cudaMemcpyDeviceToHost,
                            stream_),
            cudaSuccess);
  EXPECT_EQ(pinned[0], -1.0f) << "a copy into page-locked memory is asynchronous";
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pinned[0], 2.0f);
  EXPECT_EQ(pinned[3], 8.0f);
  // Into pageable memory the copy returns once done.
  std::vector<float> pageable(4, -1);
  SMALLEM_LAUNCH(AddTo, 1, 4, 0, stream_)(device.get(), device.get(), 4);
  ASSERT_EQ(cudaMemcpyAsync(pageable.data(), device.get(), 4 * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_),
            cudaSuccess);
  EXPECT_EQ(pageable[1], 8.0f);
  cudaFreeHost(pinned);
}

TEST_F(EmulatedStreamsTest, CopiesReadPageableMemoryWhenCalledAndPageLockedWhenTheyRun) {
  DeviceBuffer<float> device(2);
  float pageable = 1;
  ASSERT_EQ(cudaMemcpyAsync(device.get(), &pageable, sizeof(float), cudaMemcpyHostToDevice,
                            stream_),
            cudaSuccess);
  pageable = 2;
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), sizeof(float), 0), cudaSuccess);
  *pinned = 3;
  ASSERT_EQ(cudaMemcpyAsync(device.get() + 1, pinned, sizeof(float), cudaMemcpyHostToDevice,
                            stream_),
            cudaSuccess);
  *pinned = 4;  // before the copy has run: a race the device would lose too
  EXPECT_EQ(device.Download(), (std::vector<float>{1, 4}));
  cudaFreeHost(pinned);
}

TEST_F(EmulatedStreamsTest, AGraphReplayRunsTheCapturedWorkOnTheMemoryAsItIsThen) {
  DeviceBuffer<float> x(std::vector<float>{0, 0});
  DeviceBuffer<float> y(2);
  float* host = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host), 2 * sizeof(float), 0), cudaSuccess);
  host[0] = 1;
  host[1] = 10;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y.get(), host, 2 * sizeof(float), cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  SMALLEM_LAUNCH(AddTo, 1, 2, 0, stream_)(x.get(), y.get(), 2);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(x.Download(), (std::vector<float>{0, 0})) << "capturing runs nothing";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  host[0] = 100;  // read by the second replay, not the first
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(x.Download(), (std::vector<float>{100, 10}))
      << "the first replay ran after the host wrote (it was queued)";
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(x.Download(), (std::vector<float>{200, 20}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(host);
}

TEST_F(EmulatedStreamsTest, ASynchronizationOrAllocationInsideACaptureInvalidatesIt) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaGetLastError();

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  // The legacy default stream cannot be captured.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal),
            cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
}

__global__ void TrapAlways() { __trap(); }

TEST_F(EmulatedStreamsTest, AFaultIsReportedByTheSynchronizingCallNotTheLaunch) {
  SMALLEM_LAUNCH(TrapAlways, 1, 1, 0, stream_)();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the launch itself was good";
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, stream_), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(done), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("TrapAlways"), std::string::npos) << LastFault();
  cudaEventDestroy(done);
}

TEST_F(EmulatedStreamsTest, MemGetInfoCountsLiveAllocations) {
  size_t free_before = 0, total = 0, free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, kGlobalBytes);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, size_t{1} << 20);
  cudaFree(p);
}

}  // namespace
}  // namespace smallem::emu
