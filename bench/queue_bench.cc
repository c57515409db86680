// Queue throughput of a real coordinator (gRPC on loopback, SQLite file with
// synchronous=FULL), measured against a peer in the same run.
//
//   1. cycles: N simulated workers (threads, one channel each) loop
//      Lease → Heartbeat (one progress point) → Complete. Target ≥ 1,000
//      cycles/s with 50 workers.
//   2. submit: one Submit rpc of a 10,000-run grid (parse, expand, store in
//      one transaction). Target < 2 s.
//   peer: single-writer commits/s of the same SQLite settings (one fsync
//   each) — what three commits per cycle would cap the queue at without
//   group commit.
//
// Usage: smallem_queue_bench [workers=50] [seconds=5] [dir=/tmp]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/service/coordinator.h"
#include "server/store/sqlite.h"
#include "smallem/v1/client.grpc.pb.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "runspec/run_result.h"

namespace smallem {
namespace {

using Steady = std::chrono::steady_clock;

double Since(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return c;
}

// A grid of `lrs` variants (one axis) × `seeds` seeds.
std::string GridYaml(const std::string& name, int lrs, int seeds) {
  std::string yaml = absl::StrCat(
      "name: ", name, "\ndata: /bench/data\n"
      "base: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4}\n"
      "budget: {steps: 20}\nseeds: [");
  for (int s = 1; s <= seeds; ++s) absl::StrAppend(&yaml, s == 1 ? "" : ", ", s);
  absl::StrAppend(&yaml, "]\nbaseline: lr=0.0001\ngrid:\n  lr: [");
  for (int i = 1; i <= lrs; ++i) absl::StrAppend(&yaml, i == 1 ? "" : ", ", 0.0001 * i);
  absl::StrAppend(&yaml, "]\n");
  return yaml;
}

absl::StatusOr<double> SubmitSeconds(v1::ClientService::Stub& client, const std::string& yaml,
                                     const std::string& hash, v1::SubmitResponse* response) {
  v1::SubmitRequest request;
  request.set_grid_yaml(yaml);
  request.set_grid_file_name("bench.yaml");
  (*request.mutable_dataset_hashes())["/bench/data"] = hash;
  const auto start = Steady::now();
  grpc::Status status = client.Submit(Context().get(), request, response);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return Since(start);
}

// Single-writer commit rate with the coordinator's settings: the peer.
double PeerCommitsPerSecond(const std::string& path, double seconds) {
  std::unique_ptr<SqliteDb> db = *SqliteDb::Open(path);
  db->Exec("CREATE TABLE t (x INTEGER)").IgnoreError();
  int64_t n = 0;
  const auto start = Steady::now();
  while (Since(start) < seconds) {
    auto txn = SqliteTransaction::Begin(*db);
    db->Exec(absl::StrCat("INSERT INTO t VALUES (", n, ")")).IgnoreError();
    txn->Commit().IgnoreError();
    ++n;
  }
  return n / Since(start);
}

int Main(int argc, char** argv) {
  const int workers = argc > 1 ? std::atoi(argv[1]) : 50;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  const std::string base = argc > 3 ? argv[3] : "/tmp";
  const std::string dir = absl::StrCat(base, "/smallem_queue_bench_", getpid());
  std::filesystem::create_directories(dir);
  spdlog::set_level(spdlog::level::warn);

  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir + "/bench.db";
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "%s\n", std::string(coordinator.status().message()).c_str());
    return 1;
  }
  // A stand-in dataset, marked present (its content is not read here).
  const std::string hash(64, 'b');
  SqliteStore& store = (*coordinator)->store();
  const DatasetChunkRef meta{.file_name = "meta.json", .file_size = 2, .offset = 0, .length = 2};
  store.PutDatasetChunk(hash, meta, "{}", 0).IgnoreError();
  store.CompleteDataset(hash, {meta}, store.DatasetDrops()).IgnoreError();
  auto client = v1::ClientService::NewStub(
      grpc::CreateChannel((*coordinator)->address(), grpc::InsecureChannelCredentials()));

  // 2. Submit a 10,000-run grid (100 variants × 100 seeds).
  v1::SubmitResponse submitted;
  absl::StatusOr<double> submit_s = SubmitSeconds(*client, GridYaml("big", 100, 100), hash,
                                                  &submitted);
  if (!submit_s.ok()) {
    std::fprintf(stderr, "submit: %s\n", std::string(submit_s.status().message()).c_str());
    return 1;
  }
  v1::SubmitResponse resubmitted;
  absl::StatusOr<double> resubmit_s = SubmitSeconds(*client, GridYaml("big", 100, 100), hash,
                                                    &resubmitted);

  // 1. Lease → heartbeat → complete cycles, over those runs and a pool of
  // 30,000 more, so the queue never runs dry.
  v1::SubmitResponse pool;
  if (!SubmitSeconds(*client, GridYaml("pool", 300, 100), hash, &pool).ok()) return 1;
  std::atomic<int64_t> cycles{0};
  std::atomic<int64_t> empty{0};
  std::atomic<int64_t> errors{0};
  std::atomic<bool> stop{false};
  absl::Mutex first_error_mu;
  std::string first_error;
  auto note = [&](const char* what, const grpc::Status& status) {
    ++errors;
    absl::MutexLock lock(&first_error_mu);
    if (first_error.empty()) first_error = absl::StrCat(what, ": ", status.error_message());
  };
  std::vector<std::thread> threads;
  const auto start = Steady::now();
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      grpc::ChannelArguments args;
      args.SetInt("bench.worker", w);  // a channel (connection) per worker
      auto stub = v1::WorkerService::NewStub(grpc::CreateCustomChannel(
          (*coordinator)->address(), grpc::InsecureChannelCredentials(), args));
      const std::string id = absl::StrCat("bench-", w);
      // The coordinator leases only to registered workers.
      v1::RegisterRequest reg;
      reg.set_worker_id(id);
      reg.set_hostname("bench");
      v1::Device* device = reg.add_devices();
      device->set_name("cpu");
      device->set_device_class("bench");
      v1::RegisterResponse registered;
      if (grpc::Status st = stub->Register(Context().get(), reg, &registered); !st.ok()) {
        note("register", st);
        return;
      }
      while (!stop.load()) {
        v1::LeaseRequest lease_request;
        lease_request.set_worker_id(id);
        lease_request.set_device("cpu");
        lease_request.set_device_class("bench");
        v1::LeaseResponse lease;
        if (grpc::Status st = stub->Lease(Context().get(), lease_request, &lease); !st.ok()) {
          note("lease", st);
          continue;
        }
        if (!lease.leased()) {
          ++empty;
          continue;
        }
        v1::HeartbeatRequest beat;
        beat.set_worker_id(id);
        beat.set_run_id(lease.run_id());
        beat.set_attempt(lease.attempt());
        v1::Progress* p = beat.add_points();
        p->set_step(10);
        p->set_total_steps(20);
        p->set_loss(4.2);
        v1::HeartbeatResponse beat_response;
        if (grpc::Status st = stub->Heartbeat(Context().get(), beat, &beat_response); !st.ok()) {
          note("heartbeat", st);
        }
        v1::CompleteRequest done;
        done.set_worker_id(id);
        done.set_run_id(lease.run_id());
        done.set_attempt(lease.attempt());
        done.set_result_json(
            RunResult{.val_nats_per_byte = 1.0, .device_class = "bench"}.ToJson().dump());
        v1::CompleteResponse done_response;
        if (grpc::Status st = stub->Complete(Context().get(), done, &done_response); st.ok()) {
          ++cycles;
        } else {
          note("complete", st);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  const double elapsed = Since(start);
  const double cycles_per_s = cycles.load() / elapsed;
  (*coordinator)->Shutdown();
  const double peer = PeerCommitsPerSecond(dir + "/peer.db", 2.0);
  std::filesystem::remove_all(dir);

  std::printf("queue bench (SQLite synchronous=FULL, WAL, loopback gRPC, %u cores)\n",
              std::thread::hardware_concurrency());
  std::printf("%-44s %12s %12s\n", "measure", "value", "target");
  std::printf("%-44s %12.0f %12s\n",
              absl::StrCat("lease→heartbeat→complete cycles/s, ", workers, " workers").c_str(),
              cycles_per_s, ">= 1000");
  std::printf("%-44s %12.3f %12s\n",
              absl::StrCat("submit ", submitted.runs_total(), "-run grid, s").c_str(), *submit_s,
              "< 2");
  if (resubmit_s.ok()) {
    std::printf("%-44s %12.3f %12s\n", "resubmit it (nothing added), s", *resubmit_s, "");
  }
  std::printf("%-44s %12.0f %12s\n", "peer: single-writer fsync'd commits/s", peer, "");
  std::printf("%-44s %12.2f %12s\n", "ratio: cycles/s ÷ (peer commits/s ÷ 3)",
              cycles_per_s / (peer / 3), "");
  std::printf("%-44s %12lld %12s\n", "failed calls", static_cast<long long>(errors.load()), "0");
  if (!first_error.empty()) std::printf("first failure: %s\n", first_error.c_str());
  std::printf("%-44s %12lld %12s\n", "empty leases (queue ran dry)",
              static_cast<long long>(empty.load()), "0");
  return 0;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) { return smallem::Main(argc, argv); }
