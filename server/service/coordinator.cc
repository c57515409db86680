#include "server/service/coordinator.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "server/http/metrics_text.h"
#include "server/queue/sequential_looks.h"
#include "server/service/client_service.h"
#include "server/service/worker_service.h"
#include "spdlog/spdlog.h"

namespace smallem {
namespace {

// Off loopback, anyone who can reach the port can call an open service, and
// tokens sent in plaintext can be read on the way.
void WarnAboutExposure(const CoordinatorOptions& options) {
  if (IsLoopbackListen(options.listen)) return;
  const ServerSecurity& s = options.security;
  if (s.client_token.empty()) {
    spdlog::warn("listening on {} without a client token: anyone who can reach it can submit "
                 "and cancel; give --client-token-file FILE (docs/security.md)", options.listen);
  }
  if (s.worker_token.empty()) {
    spdlog::warn("listening on {} without a worker token: anyone who can reach it can lease "
                 "runs and report results; give --worker-token-file FILE (docs/security.md)",
                 options.listen);
  }
  if (s.any_token() && !s.tls()) {
    spdlog::warn("listening on {} without TLS: tokens cross the network in clear text; give "
                 "--tls-cert FILE --tls-key FILE (docs/security.md)", options.listen);
  }
}

}  // namespace

absl::StatusOr<int> DecidePendingLooks(SqliteStore& store, const Clock& clock) {
  ASSIGN_OR_RETURN(const std::vector<ExperimentRecord> experiments,
                   store.ListExperiments(std::numeric_limits<int>::max()));
  int decided = 0;
  for (const ExperimentRecord& e : experiments) {
    if (e.seed_schedule.empty()) continue;
    absl::StatusOr<LookPlan> plan = store.DecideLooks(e.id, clock.NowUnixMs());
    // One experiment whose stored grid no longer reads must not keep the
    // coordinator from starting; its looks wait.
    if (!plan.ok()) {
      spdlog::warn("experiment {}: its looks stay undecided: {}", e.name,
                   plan.status().ToString());
      continue;
    }
    decided += static_cast<int>(plan->decisions.size());
  }
  return decided;
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  const Clock* clock = options.clock != nullptr ? options.clock : SystemClock::Get();
  std::unique_ptr<Coordinator> c(new Coordinator());
  ASSIGN_OR_RETURN(c->store_, SqliteStore::Open(options.db_path));
  // An upload under way when the last coordinator stopped can never finish
  // (its stream is gone); its chunks would only take disk.
  ASSIGN_OR_RETURN(const int dropped, c->store_->DeleteIncompleteDatasets());
  if (dropped > 0) {
    spdlog::info("dropped {} unfinished dataset upload{} left by the last run (clients send "
                 "them again)", dropped, dropped == 1 ? "" : "s");
  }
  // So can a checkpoint upload; the run keeps its last complete checkpoint
  // and its worker uploads the next one in full.
  ASSIGN_OR_RETURN(const int partial, c->store_->DeleteIncompleteCheckpoints());
  if (partial > 0) {
    spdlog::info("dropped {} unfinished checkpoint upload{} left by the last run", partial,
                 partial == 1 ? "" : "s");
  }
  // And a backup's copy, half written.
  if (const int copies = RemoveBackupCopies(options.db_path); copies > 0) {
    spdlog::info("removed {} backup cop{} left by the last run", copies,
                 copies == 1 ? "y" : "ies");
  }
  // Sequential seeds: every Complete decides the looks its result ends, in
  // its own transaction; a decision a crash interrupted (or one whose step
  // failed) is taken now.
  c->store_->SetLookPlanner(PlanLooks);
  ASSIGN_OR_RETURN(const int decided, DecidePendingLooks(*c->store_, *clock));
  if (decided > 0) {
    spdlog::info("decided {} look{} of sequential seeds left open by the last run", decided,
                 decided == 1 ? "" : "s");
  }
  c->queue_ = std::make_unique<JobQueue>(c->store_.get(), clock, options.queue);
  c->workers_ = std::make_unique<WorkerRegistry>(c->store_.get(), clock);
  const std::filesystem::path db_dir =
      std::filesystem::absolute(options.db_path).parent_path();
  // One reserve for every upload: what one has claimed, no other can.
  const DiskReserve reserve{.dir = db_dir.string(),
                            .min_free_bytes = options.min_free_disk_bytes,
                            .claims = std::make_shared<DiskClaims>()};
  c->client_service_ = std::make_unique<ClientServiceImpl>(
      c->store_.get(), c->queue_.get(), c->workers_.get(), clock, reserve,
      options.max_following_streams, options.backup_deadline, options.transfer_streams);
  c->worker_service_ = std::make_unique<WorkerServiceImpl>(
      c->store_.get(), c->queue_.get(), c->workers_.get(), options.transfer_streams);
  c->worker_service_->set_disk_reserve(reserve);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, MakeServerCredentials(options.security), &c->port_);
  builder.RegisterService(c->client_service_.get());
  builder.RegisterService(c->worker_service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  // gRPC lets two servers share a port by default (SO_REUSEPORT): a second
  // coordinator — perhaps open, on an empty database — would silently take
  // half the connections. A port is one coordinator's.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeRpcMetricsInterceptor(&c->rpc_metrics_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  c->server_ = builder.BuildAndStart();
  if (c->server_ == nullptr || c->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen,
        " (is another coordinator running? pick another port with --listen",
        options.security.tls() ? "; are --tls-cert and --tls-key a certificate and its key?"
                               : "",
        ")"));
  }
  WarnAboutExposure(options);
  const std::string host = options.listen.substr(0, options.listen.rfind(':'));
  c->bound_address_ = absl::StrCat(host, ":", c->port_);
  c->address_ = absl::StrCat(host == "0.0.0.0" || host == "[::]" ? "127.0.0.1" : host, ":",
                             c->port_);
  if (!options.http_listen.empty()) {
    c->dashboard_api_ = std::make_unique<DashboardApi>(c->store_.get(), c->queue_.get(),
                                                       c->workers_.get(), clock);
    Coordinator* self = c.get();
    const int64_t alive_within_ms = options.queue.lease_duration_ms;
    ASSIGN_OR_RETURN(
        c->dashboard_,
        DashboardServer::Start(
            DashboardOptions{.listen = options.http_listen,
                             .client_token = options.security.client_token,
                             .tls_cert_pem = options.security.tls_cert_pem,
                             .tls_key_pem = options.security.tls_key_pem},
            c->dashboard_api_.get(), [self, clock, alive_within_ms] {
              return RenderMetricsText(*self->store_, *self->workers_, *clock,
                                       self->rpc_metrics_, alive_within_ms);
            }));
    if (!IsLoopbackListen(options.http_listen) && options.security.client_token.empty()) {
      spdlog::warn("the dashboard listens on {} without a client token: anyone who can reach "
                   "it can read every experiment; give --client-token-file FILE "
                   "(docs/dashboard.md)", options.http_listen);
    }
  }
  if (options.reaper) c->queue_->StartReaper();
  return c;
}

Coordinator::~Coordinator() { Shutdown(); }

void Coordinator::Shutdown(int64_t grace_ms) {
  if (shut_down_) return;
  shut_down_ = true;
  // The dashboard's requests read the store: it stops first.
  if (dashboard_api_ != nullptr) dashboard_api_->Stop();
  if (dashboard_ != nullptr) dashboard_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
    server_->Wait();
  }
  if (queue_ != nullptr) queue_->StopReaper();
}

int RunCoordinator(const CoordinatorOptions& options) {
  // Signals are taken synchronously by this thread: block them before any
  // other thread starts, so none of gRPC's threads receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  if (!coordinator.ok()) {
    spdlog::error("{}", std::string(coordinator.status().message()));
    return 1;
  }
  const ServerSecurity& security = options.security;
  spdlog::info("smallem-coordinator listening on {} ({}; worker token {}, client token {}; "
               "database {})",
               (*coordinator)->bound_address(), security.tls() ? "TLS" : "plaintext",
               security.worker_token.empty() ? "off" : "required",
               security.client_token.empty() ? "off" : "required", options.db_path);
  if (!(*coordinator)->dashboard_url().empty()) {
    spdlog::info("dashboard at {} (/metrics for Prometheus)", (*coordinator)->dashboard_url());
  }
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("signal {}: shutting down", signal);
  (*coordinator)->Shutdown(/*grace_ms=*/5000);
  return 0;
}

}  // namespace smallem
