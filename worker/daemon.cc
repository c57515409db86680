// WorkerDaemon: registration, the per-device loops, drain and stop, and the
// signal handling of smallem-worker. Running one job is in daemon_job.cc.
#include "worker/daemon.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace smallem {

WorkerDaemon::WorkerDaemon(WorkerOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      cache_(options_.cache_dir),
      jobs_(options_.cache_dir, options_.max_failed_job_dirs) {
  if (options_.worker_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    options_.worker_id = absl::StrCat(host, "-", getpid());
  }
  client_ = std::make_unique<CoordinatorClient>(options_.coordinator, options_.rpc_deadline,
                                                options_.security);
}

WorkerDaemon::~WorkerDaemon() = default;

bool WorkerDaemon::draining() {
  absl::MutexLock lock(&mu_);
  return draining_ || stopping_;
}

bool WorkerDaemon::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void WorkerDaemon::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool WorkerDaemon::hurrying() {
  absl::MutexLock lock(&mu_);
  return hurry_;
}

void WorkerDaemon::Stop() {
  absl::MutexLock lock(&mu_);
  hurry_ = stopping_;
  draining_ = true;
  stopping_ = true;
}

bool WorkerDaemon::WaitOnClock(int64_t ms, bool wake_on_drain) {
  const int64_t start = clock_->NowUnixMs();
  absl::MutexLock lock(&mu_);
  auto woken = [this, wake_on_drain]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (wake_on_drain && draining_);
  };
  while (true) {
    const int64_t now = clock_->NowUnixMs();
    // A clock set back (the wall clock corrected) ends the wait rather than
    // stretching it.
    if (now - start >= ms || now < start) return true;
    // Nothing signals a move of the clock: look at it again soon.
    const int64_t slice = std::min(start + ms - now, kClockCheckMs);
    if (mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(slice))) return false;
  }
}

int64_t WorkerDaemon::NextBackoffMs(int64_t current) const {
  // Full jitter around a doubling step, so a fleet of workers does not
  // reconnect in lockstep after a coordinator restart.
  thread_local std::mt19937_64 rng(std::random_device{}());
  const int64_t next = std::min(options_.max_backoff_ms, std::max(current * 2, int64_t{1}));
  std::uniform_int_distribution<int64_t> jitter(next / 2, next);
  return jitter(rng);
}

bool WorkerDaemon::EnsureRegistered() {
  {
    absl::MutexLock lock(&mu_);
    if (registered_) return true;
  }
  v1::RegisterRequest request;
  request.set_worker_id(options_.worker_id);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  request.set_hostname(host);
  request.set_slurm_job_id(options_.slurm_job_id);
  request.set_slurm_node(options_.slurm_node);
  for (const DeviceInfo& d : options_.devices) {
    v1::Device* device = request.add_devices();
    device->set_name(d.name);
    device->set_device_class(d.device_class);
    device->set_memory_bytes(d.memory_bytes);
  }
  absl::StatusOr<v1::RegisterResponse> response = client_->Register(request);
  if (!response.ok()) {
    const absl::Status& s = response.status();
    if (absl::IsUnauthenticated(s) || absl::IsInvalidArgument(s) ||
        absl::IsPermissionDenied(s)) {
      // Asking again cannot help: stop, and say what to fix.
      absl::MutexLock lock(&mu_);
      if (refused_.ok()) {
        refused_ = absl::Status(s.code(), absl::StrCat(
            "the coordinator at ", options_.coordinator, " refused this worker: ", s.message(),
            absl::IsUnauthenticated(s) ? " (check --token-file or $SMALLEM_WORKER_TOKEN)" : ""));
      }
      stopping_ = true;
      return false;
    }
    spdlog::warn("cannot register with {}: {}", options_.coordinator,
                 std::string(s.message()));
    return false;
  }
  absl::MutexLock lock(&mu_);
  registered_ = true;
  if (response->heartbeat_interval_ms() > 0) {
    heartbeat_interval_ms_ = response->heartbeat_interval_ms();
  }
  spdlog::info("worker {} registered with {} ({} device{})", options_.worker_id,
               options_.coordinator, options_.devices.size(),
               options_.devices.size() == 1 ? "" : "s");
  return true;
}

absl::Status WorkerDaemon::Run() {
  if (options_.devices.empty()) return absl::InvalidArgumentError("no devices to offer");
  if (options_.cache_dir.empty()) return absl::InvalidArgumentError("--cache: required");
  if (options_.child_program.empty()) {
    return absl::InvalidArgumentError("no child program to run jobs with");
  }
  jobs_.SweepAbandoned();  // directories left by a daemon that was killed
  std::vector<std::thread> loops;
  for (const DeviceInfo& device : options_.devices) {
    loops.emplace_back([this, device] { DeviceLoop(device); });
  }
  for (std::thread& t : loops) t.join();
  absl::MutexLock lock(&mu_);
  if (!refused_.ok()) return refused_;
  spdlog::info("worker {} stopped", options_.worker_id);
  return absl::OkStatus();
}

void WorkerDaemon::DeviceLoop(const DeviceInfo& device) {
  int64_t backoff_ms = options_.initial_backoff_ms;
  while (!draining()) {
    if (!EnsureRegistered()) {
      WaitOnClock(backoff_ms, /*wake_on_drain=*/true);
      backoff_ms = NextBackoffMs(backoff_ms);
      continue;
    }
    v1::LeaseRequest request;
    request.set_worker_id(options_.worker_id);
    request.set_device(device.name);
    request.set_device_class(device.device_class);
    absl::StatusOr<v1::LeaseResponse> lease = client_->Lease(request);
    if (!lease.ok()) {
      if (IsTransient(lease.status())) {
        // The coordinator may come back as a fresh process: register again.
        absl::MutexLock lock(&mu_);
        registered_ = false;
      }
      spdlog::warn("{}: lease failed ({}); retrying in {} ms", device.name,
                   std::string(lease.status().message()), backoff_ms);
      WaitOnClock(backoff_ms, /*wake_on_drain=*/true);
      backoff_ms = NextBackoffMs(backoff_ms);
      continue;
    }
    backoff_ms = options_.initial_backoff_ms;
    if (!lease->leased()) {
      WaitOnClock(std::max<int64_t>(lease->retry_after_ms(), 50), /*wake_on_drain=*/true);
      continue;
    }
    RunJob(device, *lease);
  }
}

int RunWorker(WorkerOptions options, pid_t parent_pid) {
  if (parent_pid != 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before prctl: then nothing would kill us.
    if (getppid() != parent_pid) {
      spdlog::error("--parent-pid {}: not this worker's parent (it has exited?)", parent_pid);
      return 1;
    }
  }
  // Signals are taken synchronously by one thread: block them before any
  // other thread starts. SIGUSR1 tells that thread the run is over.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Under Slurm, the job and node go to the coordinator with the registration.
  auto from_env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  if (options.slurm_job_id.empty()) options.slurm_job_id = from_env("SLURM_JOB_ID");
  if (options.slurm_node.empty()) options.slurm_node = from_env("SLURMD_NODENAME");
  if (!options.slurm_job_id.empty()) {
    spdlog::info("running in Slurm job {} on node {}", options.slurm_job_id,
                 options.slurm_node.empty() ? "?" : options.slurm_node);
  }

  WorkerDaemon daemon(std::move(options));
  std::thread signal_thread([&] {
    for (int received = 0;;) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) continue;
      if (signal == SIGUSR1) return;
      if (++received == 1 && signal == SIGINT) {
        spdlog::info("SIGINT: draining (running jobs finish; signal again to stop now)");
        daemon.Drain();
      } else {
        spdlog::info("signal {}: stopping now; running runs go back to the queue", signal);
        daemon.Stop();
      }
    }
  });
  absl::Status status = daemon.Run();
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  if (!status.ok()) {
    spdlog::error("{}", std::string(status.message()));
    return 1;
  }
  return 0;
}

}  // namespace smallem
