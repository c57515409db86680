#include "worker/child.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/progress_events.h"
#include "engine/train/trainer.h"
#include "nlohmann/json.hpp"
#include "runspec/run_spec.h"
#include "worker/devices.h"
#ifdef SMALLEM_WITH_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace smallem {
namespace {

std::atomic<bool> g_stop{false};

void OnTerminate(int) { g_stop.store(true); }

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  return code;
}

// The backend --device names: the CPU with `threads`, or a GPU this process
// sees, its matmuls in the training precision every GPU run uses.
absl::StatusOr<std::unique_ptr<Backend>> CreateChildBackend(const std::string& device,
                                                            int threads) {
  if (device == "cpu") {
    ASSIGN_OR_RETURN(const CpuBackend::Options options,
                     CpuBackend::OptionsFromEnvironment(threads));
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options));
  }
  const int ordinal = CudaOrdinal(device);
  if (ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", device, ": expected cpu or cuda:N"));
  }
#ifdef SMALLEM_WITH_CUDA
  return CreateCudaBackend(ordinal, kTrainingMatmulPrecision);
#else
  return absl::InvalidArgumentError(absl::StrCat(
      "--device ", device, ": this smallem-worker was built without CUDA"));
#endif
}

std::string JoinTail(const std::vector<std::string>& tail) {
  return absl::StrJoin(tail, " | ");
}

}  // namespace

int RunChild(const ChildArgs& args) {
  // SIGTERM stops training at the next step (Cancelled) instead of killing
  // mid-write.
  signal(SIGTERM, OnTerminate);
  absl::StatusOr<std::string> spec_text = ReadFile(args.spec_path);
  if (!spec_text.ok()) return Fail(kExitBadInput, std::string(spec_text.status().message()));
  nlohmann::json j = nlohmann::json::parse(*spec_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Fail(kExitBadInput, absl::StrCat(args.spec_path, ": not JSON"));
  }
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(j);
  if (!spec.ok()) {
    return Fail(kExitBadInput, absl::StrCat("run spec: ", spec.status().message()));
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) return Fail(kExitError, absl::StrCat("cannot create ", args.out_dir, ": ", ec.message()));

  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateChildBackend(args.device, args.threads);
  if (!backend.ok()) {
    // The worker's device, not the run, is at fault: exit 1 (retried,
    // perhaps elsewhere), never 2.
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return Fail(kExitError,
                absl::StrCat(args.device,
                             visible != nullptr ? absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")")
                                                : std::string(),
                             ": ", backend.status().message()));
  }
  TrainOptions options;
  options.out_dir = args.out_dir;
  options.progress_every = args.progress_every;
  options.cuda_graphs = CudaGraphsFromEnvironment();
  options.stop = &g_stop;
  options.on_progress = [](const TrainProgress& p) {
    std::printf("%s\n", FormatProgressLine(p).c_str());
    std::fflush(stdout);
  };
  options.checkpoint_path = args.checkpoint_path;
  options.on_checkpoint = [](const CheckpointWritten& w) {
    std::printf("%s\n", FormatCheckpointLine(w).c_str());
    std::fflush(stdout);
  };
  options.resume_from = args.resume_path;
  absl::StatusOr<nlohmann::json> result = Train(*spec, **backend, options);
  if (!result.ok() && IsResumeFailure(result.status())) {
    // Nothing was trained: the run starts over rather than fails.
    std::fprintf(stderr, "%s; training from the start\n",
                 std::string(result.status().message()).c_str());
    std::fflush(stderr);
    options.resume_from.clear();
    result = Train(*spec, **backend, options);
  }
  if (!result.ok() && g_stop.load()) {
    return Fail(kExitTerminated, "training stopped by SIGTERM (the worker is being stopped)");
  }
  if (!result.ok()) {
    return Fail(ExitCodeFor(result.status()), std::string(result.status().message()));
  }
  const std::string result_path = args.out_dir + "/result.json";
  if (!std::filesystem::exists(result_path)) {
    if (absl::Status s = WriteFileDurably(result_path, result->dump(2) + "\n"); !s.ok()) {
      return Fail(kExitError, std::string(s.message()));
    }
  }
  return kExitOk;
}

absl::StatusOr<ChildCommand> BuildChildCommand(const ChildArgs& args,
                                               const std::vector<std::string>& parent_env) {
  constexpr absl::string_view kVisible = "CUDA_VISIBLE_DEVICES=";
  ChildCommand command;
  std::string child_device = args.device;
  std::optional<std::string> visible;  // the child's CUDA_VISIBLE_DEVICES, when set
  if (args.device != "cpu") {
    const int ordinal = CudaOrdinal(args.device);
    if (ordinal < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", args.device, "\": expected cpu or cuda:N"));
    }
    visible = std::to_string(ordinal);
    for (const std::string& entry : parent_env) {
      if (!absl::StartsWith(entry, kVisible)) continue;
      // The daemon's ordinals (list-devices ran with this environment)
      // count the parent's visible GPUs, in the order listed.
      const std::string list = entry.substr(kVisible.size());
      std::vector<std::string> parent_visible = absl::StrSplit(list, ',', absl::SkipWhitespace());
      if (static_cast<size_t>(ordinal) >= parent_visible.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            args.device, " is not among the worker's CUDA_VISIBLE_DEVICES=", list));
      }
      visible = std::string(absl::StripAsciiWhitespace(parent_visible[ordinal]));
    }
    child_device = "cuda:0";
  }
  command.args = {"child",     "--spec",           args.spec_path,
                  "--out",     args.out_dir,       "--threads",
                  std::to_string(args.threads),    "--progress-every",
                  std::to_string(args.progress_every), "--device", child_device};
  if (!args.checkpoint_path.empty()) {
    command.args.insert(command.args.end(), {"--checkpoint", args.checkpoint_path});
  }
  if (!args.resume_path.empty()) {
    command.args.insert(command.args.end(), {"--resume", args.resume_path});
  }
  for (const std::string& entry : parent_env) {
    if (visible.has_value() && absl::StartsWith(entry, kVisible)) continue;
    command.env.push_back(entry);
  }
  if (visible.has_value()) command.env.push_back(absl::StrCat(kVisible, *visible));
  return command;
}

bool IsOutOfMemoryMessage(const std::string& text) {
  for (const char* marker : {"out of device memory", "out of memory",
                             "cudaErrorMemoryAllocation", "CUBLAS_STATUS_ALLOC_FAILED",
                             "std::bad_alloc"}) {
    if (absl::StrContains(text, marker)) return true;
  }
  return false;
}

v1::FailureClass ClassifyChildFailure(const ChildExit& exit,
                                      const std::vector<std::string>& stderr_tail) {
  if (exit.signal == 0) {
    // The child judged its own error: exit 2 is deterministic (the spec,
    // the dataset, out of memory as a Status).
    return exit.exit_code == kExitBadInput ? v1::FAILURE_CLASS_INVALID_CONFIG
                                               : v1::FAILURE_CLASS_ENGINE_ERROR;
  }
  // A crash: out of memory is still deterministic for a spec on a device
  // class when an allocation the engine cannot recover from failed (Arena
  // CHECKs on it) or operator new threw.
  for (const std::string& line : stderr_tail) {
    if (IsOutOfMemoryMessage(line)) return v1::FAILURE_CLASS_INVALID_CONFIG;
  }
  return v1::FAILURE_CLASS_ENGINE_ERROR;
}

std::string ChildFailureMessage(const ChildExit& exit,
                                const std::vector<std::string>& stderr_tail) {
  std::string message;
  if (exit.signal != 0) {
    const char* name = strsignal(exit.signal);
    message = absl::StrCat("the child was killed by signal ", exit.signal,
                           name != nullptr ? absl::StrCat(" (", name, ")") : std::string(),
                           stderr_tail.empty() ? "" : ": ", JoinTail(stderr_tail));
  } else if (!stderr_tail.empty()) {
    message = stderr_tail.back();
  } else {
    message = absl::StrCat("the child exited with code ", exit.exit_code);
  }
  if (message.size() > kMaxChildFailureMessageBytes) {
    message = absl::StrCat("...", message.substr(message.size() - kMaxChildFailureMessageBytes + 3));
  }
  return message;
}

}  // namespace smallem
