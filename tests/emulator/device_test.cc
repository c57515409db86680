// The emulated device checked against CUDA's documented semantics with
// hand-computed cases (not against kernels/, so that one misunderstanding
// cannot confirm itself): launch limits, shared memory, barriers, warp
// shuffles and votes, bf16 rounding, and the faults it reports.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "emulator/device.h"
#include "kernels/launch.cuh"
#include "tests/emulator/emulated_device.h"

namespace smallem::emu {
namespace {

class EmulatedDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetDevice(); }
  void TearDown() override { ResetDevice(); }
};

__global__ void WriteIndex(int* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = static_cast<int>(i * 10 + threadIdx.y);
}

TEST_F(EmulatedDeviceTest, EveryThreadOfTheGridRunsWithItsIndices) {
  DeviceBuffer<int> out(3 * 4);
  SMALLEM_LAUNCH(WriteIndex, 3, 4, 0, nullptr)(out.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> expected(12);
  for (int i = 0; i < 12; ++i) expected[i] = i * 10;
  EXPECT_EQ(out.Download(), expected);
}

TEST_F(EmulatedDeviceTest, LaunchOutsideAnH200sLimitsIsAConfigurationError) {
  DeviceBuffer<int> out(1);
  SMALLEM_LAUNCH(WriteIndex, 1, 1025, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  SMALLEM_LAUNCH(WriteIndex, dim3(1, 65536), 1, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  SMALLEM_LAUNCH(WriteIndex, 1, dim3(1, 1, 65), 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  SMALLEM_LAUNCH(WriteIndex, 0, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // The error is read once; a good launch afterwards succeeds.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

__global__ void SumThroughDynamicShared(const float* in, float* out) {
  SMALLEM_DYNAMIC_SHARED(float, smem, 16);
  smem[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned i = 0; i < blockDim.x; ++i) total += smem[i];
    out[0] = total;
  }
}

TEST_F(EmulatedDeviceTest, DynamicSharedMemoryAbove48KiBNeedsTheOptIn) {
  DeviceBuffer<float> in(std::vector<float>(64, 1.5f));
  DeviceBuffer<float> out(1);
  const auto kernel = reinterpret_cast<const void*>(SumThroughDynamicShared);
  SMALLEM_LAUNCH(SumThroughDynamicShared, 1, 64, 64 * 1024, nullptr)(in.get(), out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 228 * 1024),
            cudaErrorInvalidValue);  // past the 227 KiB an H200 grants
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 64 * 1024),
            cudaSuccess);
  cudaGetLastError();
  SMALLEM_LAUNCH(SumThroughDynamicShared, 1, 64, 64 * 1024, nullptr)(in.get(), out.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Download()[0], 96.0f);
}

__global__ void ReadSharedBeforeWriting(float* out) {
  SMALLEM_DYNAMIC_SHARED(float, smem, 16);
  out[threadIdx.x] = smem[threadIdx.x];
}

TEST_F(EmulatedDeviceTest, FreshDeviceAndSharedMemoryReadAsNaN) {
  DeviceBuffer<float> out(8);
  EXPECT_TRUE(std::isnan(out.Download()[3])) << "cudaMalloc'd memory is not zeroed";
  cudaMemset(out.get(), 0, 8 * sizeof(float));
  SMALLEM_LAUNCH(ReadSharedBeforeWriting, 1, 8, 8 * sizeof(float), nullptr)(out.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (float v : out.Download()) EXPECT_TRUE(std::isnan(v));
}

__global__ void BarrierInABranch(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void ReturnBeforeBarrier(int* out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST_F(EmulatedDeviceTest, BarrierDivergenceIsAStickyFaultNamingKernelBlockAndThread) {
  DeviceBuffer<int> out(32);
  SMALLEM_LAUNCH(BarrierInABranch, 2, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // found while it runs, not at launch
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("BarrierInABranch: block (0,0,0) thread ("), std::string::npos)
      << LastFault();
  EXPECT_NE(LastFault().find("barrier divergence"), std::string::npos) << LastFault();
  // Sticky: the next launch and synchronization fail too.
  SMALLEM_LAUNCH(WriteIndex, 1, 1, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);

  ResetDevice();
  SMALLEM_LAUNCH(ReturnBeforeBarrier, 1, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // found while it runs, not at launch
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("deadlock"), std::string::npos) << LastFault();
  EXPECT_NE(LastFault().find("1 thread(s) of the block have returned"), std::string::npos)
      << LastFault();
}

__global__ void Shuffles(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[0 * 32 + lane] = __shfl_sync(0xffffffffu, lane * 2, 7);
  out[1 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
  out[2 * 32 + lane] = __shfl_up_sync(0xffffffffu, lane, 3);
  out[3 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[4 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane, 4, 8);  // width 8
  out[5 * 32 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  out[6 * 32 + lane] = __any_sync(0xffffffffu, lane == 31);
  out[7 * 32 + lane] = __all_sync(0xffffffffu, lane < 31);
}

TEST_F(EmulatedDeviceTest, WarpShufflesAndVotesFollowTheDocumentedLaneRules) {
  DeviceBuffer<int> out(8 * 32);
  SMALLEM_LAUNCH(Shuffles, 1, 32, 0, nullptr)(out.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << LastFault();
  const std::vector<int> got = out.Download();
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(got[0 * 32 + l], 14);
    EXPECT_EQ(got[1 * 32 + l], l ^ 1);
    EXPECT_EQ(got[2 * 32 + l], l >= 3 ? l - 3 : l);  // lanes below delta keep their own
    EXPECT_EQ(got[3 * 32 + l], l + 3 < 32 ? l + 3 : l);
    EXPECT_EQ(got[4 * 32 + l], l ^ 4);
    EXPECT_EQ(static_cast<unsigned>(got[5 * 32 + l]), ballot);
    EXPECT_EQ(got[6 * 32 + l], 1);
    EXPECT_EQ(got[7 * 32 + l], 0);
  }
}

__global__ void ShuffleFromOutsideTheMask(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1, 20);
}

__global__ void ShuffleWithoutTheCallingLane(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1, 1);
}

__global__ void ShuffleInADivergentBranch(int* out) {
  int v = 0;
  if (threadIdx.x < 16) {
    v = __shfl_xor_sync(0xffffffffu, 1, 1);
  } else {
    v = __shfl_xor_sync(0xffffffffu, 2, 1);
  }
  out[threadIdx.x] = v;
}

TEST_F(EmulatedDeviceTest, WarpOperationsWithWrongMasksFault) {
  DeviceBuffer<int> out(32);
  SMALLEM_LAUNCH(ShuffleFromOutsideTheMask, 1, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // found while it runs, not at launch
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("which is not in the mask"), std::string::npos) << LastFault();
  ResetDevice();
  SMALLEM_LAUNCH(ShuffleWithoutTheCallingLane, 1, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // found while it runs, not at launch
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("is not in its mask"), std::string::npos) << LastFault();
  ResetDevice();
  SMALLEM_LAUNCH(ShuffleInADivergentBranch, 1, 32, 0, nullptr)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // found while it runs, not at launch
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("but lane 0 waits at"), std::string::npos) << LastFault();
}

// Each thread writes its slot, then reads its neighbour's with no barrier
// between: a shared-memory race whose result depends on the order threads
// run in.
__global__ void RacyNeighbourRead(float* out) {
  __shared__ float slots[64];
  slots[threadIdx.x] = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 64];
  __syncthreads();
}

TEST_F(EmulatedDeviceTest, ARaceBetweenBarriersGivesDifferentBitsUnderTwoSchedules) {
  DeviceBuffer<float> out(64);
  auto run = [&](uint64_t seed) {
    SetScheduleSeed(seed);
    SMALLEM_LAUNCH(RacyNeighbourRead, 1, 64, 0, nullptr)(out.get());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return out.Download();
  };
  const std::vector<float> in_order = run(0), shuffled = run(20261203);
  SetScheduleSeed(0);
  EXPECT_NE(in_order, shuffled);
}

TEST_F(EmulatedDeviceTest, Bf16ConversionRoundsToNearestEven) {
  auto bits = [](float f) { return __float2bfloat16_rn(f).bits; };
  auto from_bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  EXPECT_EQ(bits(1.0f), 0x3f80);
  EXPECT_EQ(bits(from_bits(0x3f808000u)), 0x3f80);  // halfway, even below: down
  EXPECT_EQ(bits(from_bits(0x3f818000u)), 0x3f82);  // halfway, odd below: up
  EXPECT_EQ(bits(from_bits(0x3f808001u)), 0x3f81);  // above halfway: up
  EXPECT_EQ(bits(-2.0f), 0xc000);
  EXPECT_EQ(bits(from_bits(0x7f7fffffu)), 0x7f80);  // the largest float rounds to +inf
  EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16_rn(std::nanf("")))));
  EXPECT_EQ(__bfloat162float(__nv_bfloat16{0x4049}), 3.140625f);
}

TEST_F(EmulatedDeviceTest, RuntimeCallsRefuseRangesOutsideDeviceAllocations) {
  DeviceBuffer<float> buffer(4);
  std::vector<float> host(8, 1.0f);
  EXPECT_EQ(cudaMemcpy(buffer.get(), host.data(), 8 * sizeof(float), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 4, 4 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);  // the source is host memory
  cudaGetLastError();
  EXPECT_EQ(cudaMemset(buffer.get() + 1, 0, 4 * sizeof(float)), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(prop.major * 10 + prop.minor, 90);
}

__global__ void MisalignedVectorLoad(const float* in, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(in + 1);
  out[0] = v.x;
}

TEST_F(EmulatedDeviceTest, MisalignedFloat4LoadStopsTheProgramAsOnTheDevice) {
  DeviceBuffer<float> in(std::vector<float>(8, 1.0f));
  DeviceBuffer<float> out(1);
  EXPECT_DEATH(
      {
        SMALLEM_LAUNCH(MisalignedVectorLoad, 1, 1, 0, nullptr)(in.get(), out.get());
        cudaDeviceSynchronize();
      },
      "misaligned address");
}

__global__ void ReadPastTheEnd(const float* in, float* out) {
  out[threadIdx.x] = in[threadIdx.x + 64];
}

TEST_F(EmulatedDeviceTest, OutOfBoundsDeviceReadStopsTheProgram) {
  DeviceBuffer<float> in(std::vector<float>(64, 1.0f));
  DeviceBuffer<float> out(64);
  EXPECT_DEATH(
      {
        SMALLEM_LAUNCH(ReadPastTheEnd, 1, 64, 0, nullptr)(in.get(), out.get());
        cudaDeviceSynchronize();
      },
      "heap-buffer-overflow");
}

}  // namespace
}  // namespace smallem::emu
