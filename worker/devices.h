// The devices a worker offers, from its --devices flag: "all", "cpu" or a
// comma-separated list such as "cpu,cuda:0". Each has a name, a device class
// (results are compared only within one class) and its memory.
//
// CUDA devices are discovered without initializing CUDA in the daemon: the
// daemon forks one child per job, and CUDA state must not be inherited
// across fork. `smallem-worker list-devices` (RunListDevices) asks the CUDA
// runtime in its own process and prints one JSON line per GPU;
// ListCudaDevices runs it and ParseCudaDeviceList reads its lines.
//
// Thread-compatible: plain functions; ListCudaDevices starts a process.
#ifndef SMALLEM_WORKER_DEVICES_H_
#define SMALLEM_WORKER_DEVICES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace smallem {

struct DeviceInfo {
  std::string name;          // "cpu", "cuda:0"
  std::string device_class;  // CpuBackend::DeviceClass(); the GPU model ("NVIDIA H200")
  int64_t memory_bytes = 0;  // RAM for the CPU, global memory for a GPU
};

// True when this worker was built with the CUDA backend (kernels/), so its
// children can train on cuda:N.
bool WorkerBuiltWithCuda();

// N for a device named "cuda:N" (digits only, no sign or leading zero), else
// -1 ("cpu", "cuda:", "cuda:01", "gpu0").
int CudaOrdinal(std::string_view name);

// Lists this machine's CUDA devices, in ordinal order. Unavailable, with a
// message saying why, when there is no usable GPU (no driver, no device, a
// build without CUDA); any other error means the listing itself failed.
using CudaDeviceLister = std::function<absl::StatusOr<std::vector<DeviceInfo>>()>;

// Parses the stdout lines of `smallem-worker list-devices`:
//   {"name":"cuda:0","device_class":"NVIDIA H200","memory_bytes":150000000000}
//   ... one line per GPU, in ordinal order, or one line
//   {"unavailable":"why there is no usable GPU"}
// Returns the devices; Unavailable (with the reason) for an "unavailable"
// line or no line at all; Internal naming the line for anything malformed
// (not JSON, a missing field, a name out of order).
absl::StatusOr<std::vector<DeviceInfo>> ParseCudaDeviceList(const std::vector<std::string>& lines);

// Runs `program list-devices` (program is smallem-worker itself) and parses
// its output. Unavailable as ParseCudaDeviceList says; Internal when the
// program cannot start, fails or is killed (with its last stderr line);
// DeadlineExceeded when it takes more than timeout_ms (a hung driver).
absl::StatusOr<std::vector<DeviceInfo>> ListCudaDevices(const std::string& program,
                                                        int64_t timeout_ms = 60'000);

// The devices `flag` names, the CPU first when present.
//  * "all": the CPU, then every GPU list_cuda reports (in a build with
//    CUDA). No usable GPU (Unavailable) is not an error: an info log says
//    why and the CPU alone is offered. Another listing failure is an error.
//  * "cpu", "cuda:N": each checked; list_cuda runs at most once.
// InvalidArgument for an unknown or repeated device, "all" among others, a
// CUDA device in a build without CUDA, a CUDA device when there is no usable
// GPU, or an ordinal the machine lacks (the message names how many GPUs it
// has). An empty list_cuda means no GPU can be listed (as Unavailable).
// The CPU's class counts `cpu_threads` (the worker's --threads; 0 = every
// core), as the results of its jobs will.
absl::StatusOr<std::vector<DeviceInfo>> ParseDevices(std::string_view flag,
                                                     const CudaDeviceLister& list_cuda = {},
                                                     int cpu_threads = 0);

// `smallem-worker list-devices`: prints the lines ParseCudaDeviceList reads,
// initializing CUDA in this process only. Returns the exit code: 0 when it
// printed devices or the "unavailable" line, 1 when a device could not be
// queried (the reason on stderr).
int RunListDevices();

}  // namespace smallem

#endif  // SMALLEM_WORKER_DEVICES_H_
