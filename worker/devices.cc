#include "worker/devices.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "worker/child_process.h"
#ifdef SMALLEM_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace smallem {
namespace {

DeviceInfo CpuDevice(int threads) {
  // The class the child's CpuBackend (as many threads as the worker gives
  // each job) will report in its result: `workers` and results agree.
  CpuBackend backend(threads);
  const int64_t memory =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  return DeviceInfo{.name = "cpu", .device_class = backend.DeviceClass(), .memory_bytes = memory};
}

std::string GpuCount(size_t count) {
  if (count == 1) return "1 GPU (cuda:0)";
  return absl::StrCat(count, " GPUs (cuda:0 to cuda:", count - 1, ")");
}

void PrintJsonLine(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

bool WorkerBuiltWithCuda() {
#ifdef SMALLEM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int CudaOrdinal(std::string_view name) {
  constexpr std::string_view kPrefix = "cuda:";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return -1;
  int ordinal = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    ordinal = ordinal * 10 + (c - '0');
  }
  return ordinal;
}

absl::StatusOr<std::vector<DeviceInfo>> ParseCudaDeviceList(
    const std::vector<std::string>& lines) {
  std::vector<DeviceInfo> devices;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    auto bad = [&](const std::string& why) {
      return absl::InternalError(absl::StrCat("list-devices line ", i + 1, ": ", why, ": ",
                                              lines[i].substr(0, 200)));
    };
    const nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return bad("not a JSON object");
    if (auto it = j.find("unavailable"); it != j.end()) {
      if (!it->is_string()) return bad("\"unavailable\" is not a string");
      return absl::UnavailableError(it->get<std::string>());
    }
    auto name = j.find("name");
    auto device_class = j.find("device_class");
    auto memory = j.find("memory_bytes");
    if (name == j.end() || !name->is_string()) return bad("no string \"name\"");
    if (device_class == j.end() || !device_class->is_string() ||
        device_class->get<std::string>().empty()) {
      return bad("no string \"device_class\"");
    }
    if (memory == j.end() || !memory->is_number_integer() || memory->get<int64_t>() < 0) {
      return bad("no non-negative integer \"memory_bytes\"");
    }
    DeviceInfo device{.name = name->get<std::string>(),
                      .device_class = device_class->get<std::string>(),
                      .memory_bytes = memory->get<int64_t>()};
    // Ordinals are what the children's CUDA_VISIBLE_DEVICES picks by: they
    // must come in order, without gaps.
    if (CudaOrdinal(device.name) != static_cast<int>(devices.size())) {
      return bad(absl::StrCat("expected the name \"cuda:", devices.size(), "\""));
    }
    devices.push_back(std::move(device));
  }
  if (devices.empty()) return absl::UnavailableError("list-devices reported no CUDA device");
  return devices;
}

absl::StatusOr<std::vector<DeviceInfo>> ListCudaDevices(const std::string& program,
                                                        int64_t timeout_ms) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(program, {"list-devices"});
  if (!child.ok()) return child.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::string> lines;
  while ((*child)->Poll(100, &lines)) {
    if (std::chrono::steady_clock::now() > deadline) {
      (*child)->Kill();
      (*child)->Wait();
      return absl::DeadlineExceededError(absl::StrCat(
          program, " list-devices did not finish within ", timeout_ms / 1000,
          " s (is the NVIDIA driver hung? check nvidia-smi)"));
    }
  }
  const ChildExit exit = (*child)->Wait();
  if (!exit.ok()) {
    const std::string how = exit.signal != 0 ? absl::StrCat("was killed by signal ", exit.signal)
                                             : absl::StrCat("exited with code ", exit.exit_code);
    const std::string& why = (*child)->last_stderr_line();
    return absl::InternalError(
        absl::StrCat(program, " list-devices ", how, why.empty() ? "" : ": ", why));
  }
  return ParseCudaDeviceList(lines);
}

absl::StatusOr<std::vector<DeviceInfo>> ParseDevices(std::string_view flag,
                                                     const CudaDeviceLister& list_cuda,
                                                     int cpu_threads) {
  // The GPUs, listed once, on first need.
  std::optional<absl::StatusOr<std::vector<DeviceInfo>>> gpus;
  auto list_gpus = [&]() -> const absl::StatusOr<std::vector<DeviceInfo>>& {
    if (!gpus.has_value()) {
      gpus = list_cuda ? list_cuda()
                       : absl::StatusOr<std::vector<DeviceInfo>>(absl::UnavailableError(
                             "this program does not list CUDA devices"));
    }
    return *gpus;
  };

  std::vector<DeviceInfo> devices;
  if (flag == "all") {
    devices.push_back(CpuDevice(cpu_threads));
    if (!WorkerBuiltWithCuda()) {
      spdlog::info("--devices all: the CPU (this smallem-worker was built without CUDA)");
      return devices;
    }
    const absl::StatusOr<std::vector<DeviceInfo>>& listed = list_gpus();
    if (listed.ok()) {
      devices.insert(devices.end(), listed->begin(), listed->end());
    } else if (listed.status().code() == absl::StatusCode::kUnavailable) {
      spdlog::info("--devices all: the CPU only; no usable CUDA device: {}",
                   std::string(listed.status().message()));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices all: cannot list the CUDA devices: ", listed.status().message(),
                       "; pass --devices cpu to train on the CPU only"));
    }
    return devices;
  }

  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(absl::string_view(flag.data(), flag.size()), ',')) {
    const std::string name(part);
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("--devices: \"", name, "\" is listed twice"));
    }
    const int ordinal = CudaOrdinal(name);
    if (name == "cpu") {
      devices.push_back(CpuDevice(cpu_threads));
    } else if (name == "all") {
      return absl::InvalidArgumentError(
          "--devices: all stands alone (it means the CPU and every GPU)");
    } else if (ordinal >= 0 && !WorkerBuiltWithCuda()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: ", name, ": this smallem-worker was built without CUDA (configure with "
          "-DSMALLEM_CUDA=ON where nvcc exists); use cpu"));
    } else if (ordinal >= 0) {
      const absl::StatusOr<std::vector<DeviceInfo>>& listed = list_gpus();
      if (!listed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--devices: ", name, ": no usable CUDA ",
                                                       "device: ", listed.status().message()));
      }
      if (static_cast<size_t>(ordinal) >= listed->size()) {
        return absl::InvalidArgumentError(absl::StrCat("--devices: ", name,
                                                       " does not exist; this machine has ",
                                                       GpuCount(listed->size())));
      }
      devices.push_back((*listed)[ordinal]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: unknown device \"", name, "\" (expected all, cpu or cuda:N)"));
    }
  }
  if (devices.empty()) return absl::InvalidArgumentError("--devices: no device given");
  return devices;
}

int RunListDevices() {
#ifdef SMALLEM_WITH_CUDA
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    PrintJsonLine({{"unavailable",
                    absl::StrCat("cudaGetDeviceCount failed with ", cudaGetErrorName(e), " (",
                                 cudaGetErrorString(e), "); check that a GPU is visible and "
                                 "the NVIDIA driver is loaded (nvidia-smi)")}});
    return 0;
  }
  if (count == 0) {
    PrintJsonLine({{"unavailable", "the NVIDIA driver reports 0 GPUs"}});
    return 0;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      std::fprintf(stderr, "cuda:%d: cudaGetDeviceProperties failed with %s (%s)\n", i,
                   cudaGetErrorName(e), cudaGetErrorString(e));
      return 1;
    }
    // prop.name is what CudaBackend::DeviceClass() reports in results.
    PrintJsonLine({{"name", absl::StrCat("cuda:", i)},
                   {"device_class", std::string(prop.name)},
                   {"memory_bytes", static_cast<int64_t>(prop.totalGlobalMem)}});
  }
  return 0;
#else
  PrintJsonLine({{"unavailable", "this smallem-worker was built without CUDA"}});
  return 0;
#endif
}

}  // namespace smallem
