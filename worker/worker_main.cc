// smallem-worker: parses flags (reading the token and root certificate files
// they name) and calls RunWorker (the daemon) or RunChild (one job, in its
// own process); nothing else.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "CLI/CLI.hpp"
#include "rpc/auth.h"
#include "spdlog/spdlog.h"
#include "worker/child.h"
#include "worker/daemon.h"
#include "worker/devices.h"

namespace {

// The running executable, so children are this same binary.
std::string SelfPath(const char* argv0) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : self.string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"smallem-worker — trains the coordinator's runs on this machine's devices."};
  smallem::WorkerOptions options;
  std::string devices = "all";
  std::string log_level = "info";
  options.cache_dir = ".cache/smallem";
  app.add_option("--coordinator", options.coordinator, "coordinator address, HOST:PORT")
      ->capture_default_str();
  std::string token_file;
  std::string tls_ca;
  app.add_option("--token-file", token_file,
                 "path of a file holding the coordinator's worker token, not the token\n"
                 "(default: the token itself in $SMALLEM_WORKER_TOKEN; neither: none is sent)");
  app.add_option("--tls-ca", tls_ca,
                 "PEM root certificate to check a TLS coordinator with (default\n"
                 "$SMALLEM_TLS_CA; neither: plaintext)");
  app.add_option("--devices", devices, "all, cpu, or a list such as cpu,cuda:0")
      ->capture_default_str();
  app.add_option("--cache", options.cache_dir, "directory for datasets and job outputs")
      ->capture_default_str();
  app.add_option("--id", options.worker_id, "worker id (default: HOSTNAME-PID)");
  app.add_option("--threads", options.child_threads, "CPU threads per job (0 = all)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  pid_t parent_pid = 0;
  app.add_option("--parent-pid", parent_pid,
                 "die with this process, the one starting the worker (smallemctl run does)");

  smallem::ChildArgs child;
  CLI::App* child_cmd = app.add_subcommand("child", "run one job (started by the daemon)");
  child_cmd->add_option("--spec", child.spec_path, "run spec JSON")->required();
  child_cmd->add_option("--out", child.out_dir, "output directory")->required();
  child_cmd->add_option("--threads", child.threads, "CPU threads (0 = all)");
  child_cmd->add_option("--progress-every", child.progress_every, "steps between progress lines");
  child_cmd->add_option("--device", child.device, "cpu or cuda:N (as this process sees the GPUs)");
  child_cmd->add_option("--checkpoint", child.checkpoint_path,
                        "write checkpoints here, every checkpoint_minutes of the spec");
  child_cmd->add_option("--resume", child.resume_path, "continue from this checkpoint");
  CLI::App* list_devices_cmd = app.add_subcommand(
      "list-devices", "print one JSON line per CUDA device (run by the daemon for --devices)");

  CLI11_PARSE(app, argc, argv);
  if (child_cmd->parsed()) return smallem::RunChild(child);
  if (list_devices_cmd->parsed()) return smallem::RunListDevices();

  spdlog::set_level(spdlog::level::from_str(log_level));
  const std::string self = SelfPath(argv[0]);
  absl::StatusOr<std::vector<smallem::DeviceInfo>> parsed =
      smallem::ParseDevices(devices, [&] { return smallem::ListCudaDevices(self); },
                            options.child_threads);
  if (!parsed.ok()) {
    spdlog::error("{}", std::string(parsed.status().message()));
    return 2;
  }
  options.devices = *parsed;
  absl::StatusOr<std::string> token = smallem::ResolveToken(token_file, smallem::kWorkerTokenEnv);
  absl::StatusOr<std::string> ca = smallem::ResolveTlsCa(tls_ca);
  for (const absl::Status& status : {token.status(), ca.status()}) {
    if (!status.ok()) {
      spdlog::error("{}", std::string(status.message()));
      return 2;
    }
  }
  options.security = {.token = *token, .tls_ca_pem = *ca};
  options.child_program = self;
  return smallem::RunWorker(options, parent_pid);
}
