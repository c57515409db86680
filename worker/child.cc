#include "worker/child.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/train/run_spec.h"
#include "engine/train/trainer.h"
#include "nlohmann/json.hpp"

namespace smallem {
namespace {

std::atomic<bool> g_stop{false};

void OnTerminate(int) { g_stop.store(true); }

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  return code;
}

}  // namespace

std::string FormatProgressLine(const TrainProgress& p) {
  nlohmann::json line = {{"event", "progress"},           {"step", p.step},
                         {"total_steps", p.total_steps},   {"loss", p.loss},
                         {"tokens_per_s", p.tokens_per_s}, {"elapsed_s", p.elapsed_s},
                         {"eta_s", p.eta_s}};
  return line.dump();
}

std::optional<TrainProgress> ParseProgressLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("event", "") != "progress") return std::nullopt;
  auto number = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  TrainProgress p;
  p.step = static_cast<int64_t>(number("step"));
  p.total_steps = static_cast<int64_t>(number("total_steps"));
  p.loss = number("loss");
  p.tokens_per_s = number("tokens_per_s");
  p.elapsed_s = number("elapsed_s");
  p.eta_s = number("eta_s");
  return p;
}

int ChildExitCode(const absl::Status& status) {
  if (status.ok()) return kChildExitOk;
  if (status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kResourceExhausted) {
    return kChildExitInvalid;
  }
  return kChildExitError;
}

int RunChild(const ChildArgs& args) {
  // SIGTERM stops training at the next step (Cancelled) instead of killing
  // mid-write.
  signal(SIGTERM, OnTerminate);
  std::ifstream in(args.spec_path);
  if (!in) return Fail(kChildExitInvalid, absl::StrCat("cannot read ", args.spec_path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Fail(kChildExitInvalid, absl::StrCat(args.spec_path, ": not JSON"));
  }
  absl::StatusOr<RunSpec> spec = RunSpec::FromJson(j);
  if (!spec.ok()) {
    return Fail(kChildExitInvalid, absl::StrCat("run spec: ", spec.status().message()));
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) return Fail(kChildExitError, absl::StrCat("cannot create ", args.out_dir, ": ", ec.message()));

  CpuBackend backend(args.threads);
  TrainOptions options;
  options.out_dir = args.out_dir;
  options.progress_every = args.progress_every;
  options.stop = &g_stop;
  options.on_progress = [](const TrainProgress& p) {
    std::printf("%s\n", FormatProgressLine(p).c_str());
    std::fflush(stdout);
  };
  absl::StatusOr<nlohmann::json> result = Train(*spec, backend, options);
  if (!result.ok()) return Fail(ChildExitCode(result.status()), std::string(result.status().message()));
  if (!std::filesystem::exists(args.out_dir + "/result.json")) {
    std::ofstream out(args.out_dir + "/result.json", std::ios::trunc);
    out << result->dump(2) << "\n";
    if (!out) return Fail(kChildExitError, absl::StrCat("cannot write ", args.out_dir, "/result.json"));
  }
  return kChildExitOk;
}

}  // namespace smallem
