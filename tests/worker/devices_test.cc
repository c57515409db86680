// --devices: which devices a worker offers, and how it finds its GPUs
// (`smallem-worker list-devices`, in its own process). Every test passes on a
// machine without a GPU, in a build with CUDA and in one without: the GPUs
// come from a fake lister, and what a build without CUDA must refuse is
// checked through WorkerBuiltWithCuda().
#include "worker/devices.h"

#include <sys/stat.h>

#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

using testing::TempDir;

DeviceInfo FakeGpu(int ordinal) {
  return DeviceInfo{.name = absl::StrCat("cuda:", ordinal), .device_class = "NVIDIA H200",
                    .memory_bytes = int64_t{150} << 30};
}

// A lister reporting `count` fake H200s, counting its calls.
CudaDeviceLister FakeGpus(int count, int* calls = nullptr) {
  return [count, calls]() -> absl::StatusOr<std::vector<DeviceInfo>> {
    if (calls != nullptr) ++*calls;
    std::vector<DeviceInfo> gpus;
    for (int i = 0; i < count; ++i) gpus.push_back(FakeGpu(i));
    return gpus;
  };
}

CudaDeviceLister Failing(absl::Status status) {
  return [status]() -> absl::StatusOr<std::vector<DeviceInfo>> { return status; };
}

std::vector<std::string> Names(const std::vector<DeviceInfo>& devices) {
  std::vector<std::string> names;
  for (const DeviceInfo& d : devices) names.push_back(d.name);
  return names;
}

// Expects `flag` to be refused with a message containing `needle`.
void ExpectRefused(std::string_view flag, const CudaDeviceLister& lister,
                   const std::string& needle) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = ParseDevices(flag, lister);
  ASSERT_FALSE(devices.ok()) << flag << " was accepted";
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument) << devices.status();
  EXPECT_NE(devices.status().message().find(needle), absl::string_view::npos)
      << flag << ": " << devices.status().message();
}

TEST(DevicesTest, CpuIsTheMachineWithItsMemory) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = ParseDevices("cpu");
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name, "cpu");
  EXPECT_FALSE((*devices)[0].device_class.empty());
  EXPECT_GT((*devices)[0].memory_bytes, 0);
}

TEST(DevicesTest, TheCpuClassCountsTheThreadsEachJobGets) {
  // A worker started with --threads 1 offers the class its jobs' results
  // will carry (CpuBackend(1)), not the whole machine's.
  absl::StatusOr<std::vector<DeviceInfo>> one = ParseDevices("cpu", {}, /*cpu_threads=*/1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[0].device_class, CpuBackend(1).DeviceClass());
  EXPECT_EQ((*one)[0].device_class.rfind("cpu-1t", 0), 0u) << (*one)[0].device_class;
  absl::StatusOr<std::vector<DeviceInfo>> all = ParseDevices("all", {}, /*cpu_threads=*/2);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0].device_class.rfind("cpu-2t", 0), 0u) << (*all)[0].device_class;
}

TEST(DevicesTest, AllIsTheCpuFirstThenEveryGpu) {
  int calls = 0;
  absl::StatusOr<std::vector<DeviceInfo>> devices = ParseDevices("all", FakeGpus(2, &calls));
  ASSERT_TRUE(devices.ok()) << devices.status();
  if (WorkerBuiltWithCuda()) {
    EXPECT_EQ(Names(*devices), (std::vector<std::string>{"cpu", "cuda:0", "cuda:1"}));
    EXPECT_EQ((*devices)[1].device_class, "NVIDIA H200");
    EXPECT_EQ(calls, 1);
  } else {
    // Nothing to train a GPU with: the GPUs are not even looked for.
    EXPECT_EQ(Names(*devices), (std::vector<std::string>{"cpu"}));
    EXPECT_EQ(calls, 0);
  }
}

TEST(DevicesTest, AllWithoutAUsableGpuIsTheCpuAlone) {
  for (const CudaDeviceLister& lister :
       {Failing(absl::UnavailableError("the NVIDIA driver reports 0 GPUs")), CudaDeviceLister()}) {
    absl::StatusOr<std::vector<DeviceInfo>> devices = ParseDevices("all", lister);
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_EQ(Names(*devices), (std::vector<std::string>{"cpu"}));
  }
}

TEST(DevicesTest, AllFailsWhenTheGpusCannotBeListed) {
  const CudaDeviceLister broken = Failing(absl::InternalError("list-devices was killed"));
  if (!WorkerBuiltWithCuda()) {
    ASSERT_TRUE(ParseDevices("all", broken).ok());
    return;
  }
  ExpectRefused("all", broken, "list-devices was killed");
  ExpectRefused("all", broken, "--devices cpu");
}

TEST(DevicesTest, RepeatedDeviceIsRefused) {
  ExpectRefused("cpu,cpu", FakeGpus(2), "\"cpu\" is listed twice");
  if (WorkerBuiltWithCuda()) ExpectRefused("cuda:1,cpu,cuda:1", FakeGpus(2), "listed twice");
}

TEST(DevicesTest, UnknownDeviceIsRefusedWithTheChoices) {
  for (std::string_view flag : {"gpu0", "cuda:", "cuda:x", "cuda:01", "cuda:-1", "CPU", "cpu,"}) {
    ExpectRefused(flag, FakeGpus(2), "expected all, cpu or cuda:N");
  }
  ExpectRefused("", FakeGpus(2), "expected all, cpu or cuda:N");
  ExpectRefused("cpu,all", FakeGpus(2), "all stands alone");
}

TEST(DevicesTest, CudaDeviceInABuildWithoutCudaSaysSo) {
  if (WorkerBuiltWithCuda()) GTEST_SKIP() << "this build has CUDA";
  ExpectRefused("cuda:0", FakeGpus(2), "built without CUDA");
  ExpectRefused("cpu,cuda:1", FakeGpus(2), "built without CUDA");
}

TEST(DevicesTest, CudaDeviceIsTakenFromTheListedGpus) {
  if (!WorkerBuiltWithCuda()) GTEST_SKIP() << "this build has no CUDA";
  int calls = 0;
  absl::StatusOr<std::vector<DeviceInfo>> devices =
      ParseDevices("cpu,cuda:1,cuda:0", FakeGpus(2, &calls));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(Names(*devices), (std::vector<std::string>{"cpu", "cuda:1", "cuda:0"}));
  EXPECT_EQ((*devices)[1].device_class, "NVIDIA H200");
  EXPECT_EQ((*devices)[1].memory_bytes, int64_t{150} << 30);
  EXPECT_EQ(calls, 1);  // listed once for both GPUs
}

TEST(DevicesTest, CudaOrdinalBeyondTheMachineNamesHowManyGpusThereAre) {
  if (!WorkerBuiltWithCuda()) GTEST_SKIP() << "this build has no CUDA";
  ExpectRefused("cuda:2", FakeGpus(2), "cuda:2 does not exist; this machine has 2 GPUs "
                                       "(cuda:0 to cuda:1)");
  ExpectRefused("cuda:1", FakeGpus(1), "this machine has 1 GPU (cuda:0)");
}

TEST(DevicesTest, CudaDeviceWithoutAUsableGpuSaysWhy) {
  if (!WorkerBuiltWithCuda()) GTEST_SKIP() << "this build has no CUDA";
  ExpectRefused("cuda:0", Failing(absl::UnavailableError("cudaErrorNoDevice")),
                "no usable CUDA device: cudaErrorNoDevice");
}

TEST(DevicesTest, CudaOrdinalReadsOnlyCanonicalNames) {
  EXPECT_EQ(CudaOrdinal("cuda:0"), 0);
  EXPECT_EQ(CudaOrdinal("cuda:12"), 12);
  for (std::string_view name : {"cpu", "cuda:", "cuda:01", "cuda:-1", "cuda:1a", "cuda1"}) {
    EXPECT_EQ(CudaOrdinal(name), -1) << name;
  }
}

TEST(CudaDeviceListTest, ParsesOneLinePerGpu) {
  absl::StatusOr<std::vector<DeviceInfo>> gpus = ParseCudaDeviceList(
      {R"({"name":"cuda:0","device_class":"NVIDIA H200","memory_bytes":150000000000})",
       R"({"name":"cuda:1","device_class":"NVIDIA H100 80GB HBM3","memory_bytes":85000000000})",
       ""});
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].name, "cuda:0");
  EXPECT_EQ((*gpus)[0].device_class, "NVIDIA H200");
  EXPECT_EQ((*gpus)[0].memory_bytes, 150000000000);
  EXPECT_EQ((*gpus)[1].device_class, "NVIDIA H100 80GB HBM3");
}

TEST(CudaDeviceListTest, UnavailableLineCarriesTheReason) {
  absl::StatusOr<std::vector<DeviceInfo>> gpus =
      ParseCudaDeviceList({R"({"unavailable":"cudaGetDeviceCount failed with cudaErrorNoDevice"})"});
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gpus.status().message(), "cudaGetDeviceCount failed with cudaErrorNoDevice");
  EXPECT_EQ(ParseCudaDeviceList({}).status().code(), absl::StatusCode::kUnavailable);
}

TEST(CudaDeviceListTest, MalformedLinesAreErrorsNamingTheLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"not json"},
      {R"({"name":"cuda:0","memory_bytes":1})"},                            // no class
      {R"({"name":"cuda:0","device_class":"","memory_bytes":1})"},          // empty class
      {R"({"name":"cuda:0","device_class":"X","memory_bytes":-1})"},        // negative memory
      {R"({"name":"cuda:0","device_class":"X","memory_bytes":"1"})"},       // memory not a number
      {R"({"name":"cuda:1","device_class":"X","memory_bytes":1})"},         // out of order
      {R"({"name":"cpu","device_class":"X","memory_bytes":1})"},            // not a GPU
      {R"({"unavailable":3})"},
  };
  for (const std::vector<std::string>& lines : cases) {
    absl::StatusOr<std::vector<DeviceInfo>> gpus = ParseCudaDeviceList(lines);
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInternal) << lines[0];
    EXPECT_NE(gpus.status().message().find("list-devices line 1"), absl::string_view::npos)
        << gpus.status();
  }
}

TEST(ListCudaDevicesTest, TheRealSubcommandListsGpusOrSaysWhyNot) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  absl::StatusOr<std::vector<DeviceInfo>> gpus = ListCudaDevices(testing::WorkerBinary());
  if (gpus.ok()) {
    // A GPU machine.
    ASSERT_TRUE(WorkerBuiltWithCuda());
    for (size_t i = 0; i < gpus->size(); ++i) {
      EXPECT_EQ((*gpus)[i].name, absl::StrCat("cuda:", i));
      EXPECT_FALSE((*gpus)[i].device_class.empty());
      EXPECT_GT((*gpus)[i].memory_bytes, 0);
    }
  } else {
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kUnavailable) << gpus.status();
    if (!WorkerBuiltWithCuda()) {
      EXPECT_NE(gpus.status().message().find("built without CUDA"), absl::string_view::npos);
    }
  }
  // Whatever the machine, "all" starts with the CPU.
  absl::StatusOr<std::vector<DeviceInfo>> all =
      ParseDevices("all", [] { return ListCudaDevices(testing::WorkerBinary()); });
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0].name, "cpu");
  EXPECT_EQ(all->size(), 1 + (gpus.ok() ? gpus->size() : 0));
}

TEST(ListCudaDevicesTest, AFailingProbeIsAnErrorWithItsMessage) {
  TempDir dir;
  const std::string probe = dir.Join("probe.sh");
  testing::WriteFile(probe, "#!/bin/sh\necho 'libcuda.so.1: cannot open' >&2\nexit 3\n");
  chmod(probe.c_str(), 0755);
  absl::StatusOr<std::vector<DeviceInfo>> gpus = ListCudaDevices(probe);
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(gpus.status().message().find("exited with code 3: libcuda.so.1: cannot open"),
            absl::string_view::npos)
      << gpus.status();
}

TEST(ListCudaDevicesTest, AHungProbeIsKilledAfterTheTimeout) {
  TempDir dir;
  const std::string probe = dir.Join("probe.sh");
  testing::WriteFile(probe, "#!/bin/sh\nexec sleep 100\n");
  chmod(probe.c_str(), 0755);
  absl::StatusOr<std::vector<DeviceInfo>> gpus = ListCudaDevices(probe, /*timeout_ms=*/300);
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kDeadlineExceeded) << gpus.status();
}

}  // namespace
}  // namespace smallem
