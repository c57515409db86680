// The devices a worker offers, from its --devices flag: "all", "cpu" or a
// comma-separated list such as "cpu,cuda:0". Each has a name, a device class
// (results are compared only within one class) and its memory.
#ifndef SMALLEM_WORKER_DEVICES_H_
#define SMALLEM_WORKER_DEVICES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

struct DeviceInfo {
  std::string name;          // "cpu", "cuda:0"
  std::string device_class;  // CpuBackend::DeviceClass() for the CPU
  int64_t memory_bytes = 0;
};

// InvalidArgument for an unknown or repeated device, or a CUDA device in a
// build without CUDA (the message says so and names the choices).
absl::StatusOr<std::vector<DeviceInfo>> ParseDevices(std::string_view flag);

}  // namespace smallem

#endif  // SMALLEM_WORKER_DEVICES_H_
