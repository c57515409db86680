#include "worker/devices.h"

#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cpu/cpu_backend.h"

namespace smallem {
namespace {

DeviceInfo CpuDevice() {
  // The class the child's CpuBackend (all threads) will report in its result.
  CpuBackend backend(0);
  const int64_t memory =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  return DeviceInfo{.name = "cpu", .device_class = backend.DeviceClass(), .memory_bytes = memory};
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> ParseDevices(std::string_view flag) {
  std::vector<DeviceInfo> devices;
  if (flag == "all") {
    // The CUDA backend is not wired into the child yet: "all" is the CPU.
    devices.push_back(CpuDevice());
    return devices;
  }
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(absl::string_view(flag.data(), flag.size()), ',')) {
    const std::string name(part);
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("--devices: \"", name, "\" is listed twice"));
    }
    if (name == "cpu") {
      devices.push_back(CpuDevice());
    } else if (name.rfind("cuda:", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: ", name, ": this worker cannot train on CUDA devices yet; use cpu"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: unknown device \"", name, "\" (expected all, cpu or cuda:N)"));
    }
  }
  if (devices.empty()) return absl::InvalidArgumentError("--devices: no device given");
  return devices;
}

}  // namespace smallem
