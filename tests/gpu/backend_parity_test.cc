// CudaBackend as a device, against the CPU backend: its description, zeroed
// allocations, out of memory as a Status that leaves the backend usable,
// fills and copies. Every test skips when no GPU is present.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::kGpu;

TEST_F(OpParityTest, BackendDescribesItsDevice) {
  EXPECT_EQ(gpu_->Name(), "cuda:0");
  EXPECT_FALSE(gpu_->DeviceClass().empty());
  const std::string device_class = gpu_->DeviceClass();
  if (device_class.find("H100") != std::string::npos ||
      device_class.find("H200") != std::string::npos) {
    EXPECT_EQ(gpu_->PeakFlops(), 989e12);
  }
}

TEST_F(OpParityTest, AllocationIsZeroedAndOutOfMemoryIsAStatus) {
  Pair t = Zeros({5, 7, 11});
  for (float v : Read(kGpu, t[kGpu])) EXPECT_EQ(v, 0.0f);
  absl::StatusOr<void*> huge = gpu_->Allocate(size_t{1} << 52);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find(std::to_string(size_t{1} << 52)), std::string::npos)
      << huge.status();
  // The failure is not sticky: the backend still works.
  Pair x = Random({3, 4});
  ExpectClose(x, 0, "copy after a failed allocation");
}

TEST_F(OpParityTest, FillAndCopies) {
  Pair f = Random({5, 7, 11});
  Pair ids = I32({37}, RandomIds(37, 1000));
  Both([&](Backend& be, Side s) {
    be.Fill(f[s], 0.25f);
    be.Fill(ids[s], 7.0f);
  });
  ExpectClose(f, 0, "fill f32");
  std::vector<int32_t> host(37);
  gpu_->CopyToHost(host.data(), ids[kGpu].data, ids[kGpu].bytes());
  for (int32_t id : host) EXPECT_EQ(id, 7);

  // Overlapping device copies behave like memmove.
  Pair x = Random({64});
  Both([&](Backend& be, Side s) {
    be.CopyOnDevice(x[s].f32() + 3, x[s].f32(), 40 * sizeof(float));
    be.CopyOnDevice(x[s].f32(), x[s].f32() + 5, 50 * sizeof(float));
  });
  ExpectClose(x, 0, "overlapping CopyOnDevice");
}

}  // namespace
}  // namespace smallem
