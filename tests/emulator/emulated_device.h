// Test helpers for the emulated device: device buffers, and running a piece
// of device work under two thread schedules to check they agree bit for bit.
#ifndef SMALLEM_TESTS_EMULATOR_EMULATED_DEVICE_H_
#define SMALLEM_TESTS_EMULATOR_EMULATED_DEVICE_H_

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

#include "emulator/device.h"

namespace smallem::emu {

// A device allocation of n T's, freed at scope end.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&data_, n * sizeof(T)), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  void Upload(const std::vector<T>& host) {
    EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

// Runs `work` (which launches and returns what it computed) once
// with threads and blocks in index order and once in a random order, and
// expects no fault and the same bits from both. Returns the first result.
inline std::vector<float> UnderTwoSchedules(const std::function<std::vector<float>()>& work) {
  SetScheduleSeed(0);
  std::vector<float> in_order = work();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << LastFault();
  SetScheduleSeed(20261203);
  std::vector<float> shuffled = work();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << LastFault();
  SetScheduleSeed(0);
  EXPECT_EQ(in_order.size(), shuffled.size());
  EXPECT_TRUE(in_order.size() == shuffled.size() &&
              std::memcmp(in_order.data(), shuffled.data(), in_order.size() * sizeof(float)) == 0)
      << "two thread schedules gave different bits";
  return in_order;
}

}  // namespace smallem::emu

#endif  // SMALLEM_TESTS_EMULATOR_EMULATED_DEVICE_H_
