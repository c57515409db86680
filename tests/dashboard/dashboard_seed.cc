// smallem_dashboard_seed: fills a running smallem-coordinator with the
// experiments the dashboard, /metrics and export tests look at, through the
// coordinator's real gRPC services (as smallemctl and a worker would):
//
//   finished  2 variants × 3 seeds at 20 steps and a reference curve (10, 20,
//             40 steps × 3 seeds), every run completed with a made-up but
//             plausible result and a few progress points;
//   running   2 runs of 1000 steps: seed 1 leased by worker "w1", with 5
//             points reporting a mixture of experts' routing (max/mean
//             load 1.25, as an MoE worker would); seed 2 diverged (a NaN loss at step 40) on every
//             attempt until its retries ran out (failed).
//
// It prints "seeded ... run=ID failed=ID attempts=N" (the running run, the
// failed one and its attempts). Then, for each line "beat" on stdin, sends the running run one more
// progress point and prints "beat STEP". Exits at end of input.
//
//   smallem_dashboard_seed --coordinator HOST:PORT --dir DIR [--token TOKEN]
#include <cmath>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rpc/auth.h"
#include "smallem/v1/client.grpc.pb.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/service_test_support.h"

namespace smallem {
namespace {

std::string token;  // the client and worker token ("" = none)

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto context = testing::Context(30);
  AttachToken(token, context.get());
  return context;
}

int Fail(const std::string& what, const grpc::Status& status) {
  std::cerr << "smallem_dashboard_seed: " << what << ": " << status.error_message() << "\n";
  return 1;
}

std::string FinishedGrid(const std::string& data) {
  return absl::StrCat(
      "name: finished\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4}\nbudget: {steps: 20}\nseeds: [1, 2, 3]\nbaseline: base\n"
      "variants:\n  base: {lr: 0.001}\n  wide: {lr: 0.002}\n"
      "reference:\n  optimizer: adamw\n  budgets: {steps: [10, 20, 40]}\n");
}

std::string RunningGrid(const std::string& data) {
  return absl::StrCat(
      "name: running\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4}\nbudget: {steps: 1000}\nseeds: [1, 2]\nbaseline: base\n"
      "variants:\n  base: {lr: 0.001}\n");
}

// The made-up loss of a finished run: the reference decays with steps; the
// "wide" variant is 0.05 better at equal steps and 20 % slower; seeds differ
// by a few thousandths.
double Loss(const v1::Run& run, int64_t steps) {
  const double noise[] = {-0.003, 0.001, 0.002};
  double loss = 1.2 + 8.0 / std::sqrt(static_cast<double>(steps) + 6.0);
  if (run.variant() == "wide") loss -= 0.05;
  return loss + noise[(run.seed() - 1) % 3];
}

int64_t StepsOf(const std::string& budget) {
  const size_t digits = budget.find_first_of("0123456789");
  int64_t steps = 0;
  if (digits != std::string::npos) (void)absl::SimpleAtoi(budget.substr(digits), &steps);
  return steps;
}

v1::Progress Point(int64_t step, int64_t total, double loss) {
  v1::Progress p;
  p.set_step(step);
  p.set_total_steps(total);
  p.set_loss(loss);
  p.set_tokens_per_s(5000 + step);
  p.set_elapsed_s(0.1 * step);
  p.set_eta_s(0.1 * (total - step));
  return p;
}

int Main(int argc, char** argv) {
  std::string address, dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--coordinator") address = argv[i + 1];
    else if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--token") token = argv[i + 1];
  }
  if (address.empty() || dir.empty()) {
    std::cerr << "usage: smallem_dashboard_seed --coordinator HOST:PORT --dir DIR [--token T]\n";
    return 2;
  }
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto client = v1::ClientService::NewStub(channel);
  auto worker = v1::WorkerService::NewStub(channel);
  const std::string data = dir + "/data";
  const std::string hash = testing::WriteFakeDataset(data);
  {
    v1::UploadDatasetResponse response;
    auto context = Ctx();
    auto writer = client->UploadDataset(context.get(), &response);
    for (const char* name : {"meta.json", "tokenizer.json", "train.bin", "val.bin"}) {
      const std::string bytes = testing::ReadFile(data + "/" + name);
      v1::DatasetChunk c;
      c.set_content_hash(hash);
      c.set_file_name(name);
      c.set_file_size(static_cast<int64_t>(bytes.size()));
      c.set_data(bytes);
      writer->Write(c);
    }
    writer->WritesDone();
    if (grpc::Status s = writer->Finish(); !s.ok()) return Fail("upload", s);
  }
  v1::RegisterRequest reg = testing::CpuRegistration();
  v1::RegisterResponse reg_response;
  if (grpc::Status s = worker->Register(Ctx().get(), reg, &reg_response); !s.ok()) {
    return Fail("register", s);
  }
  auto submit = [&](const std::string& yaml) {
    v1::SubmitRequest request;
    request.set_grid_yaml(yaml);
    request.set_grid_file_name("grid.yaml");
    (*request.mutable_dataset_hashes())[data] = hash;
    v1::SubmitResponse response;
    return client->Submit(Ctx().get(), request, &response);
  };
  auto lease = [&](v1::LeaseResponse* out) {
    v1::LeaseRequest request;
    request.set_worker_id("w1");
    request.set_device("cpu");
    request.set_device_class("cpu-test");
    return worker->Lease(Ctx().get(), request, out);
  };
  if (grpc::Status s = submit(FinishedGrid(data)); !s.ok()) return Fail("submit finished", s);
  while (true) {
    v1::LeaseResponse leased;
    if (grpc::Status s = lease(&leased); !s.ok()) return Fail("lease", s);
    if (!leased.leased()) break;
    v1::GetRunRequest get;
    get.set_run_id(leased.run_id());
    v1::GetRunResponse run;
    if (grpc::Status s = client->GetRun(Ctx().get(), get, &run); !s.ok()) return Fail("get", s);
    const int64_t steps = StepsOf(run.run().budget());
    const double loss = Loss(run.run(), steps);
    const double seconds = 0.1 * steps * (run.run().variant() == "wide" ? 1.2 : 1.0);
    v1::CompleteRequest done;
    done.set_worker_id("w1");
    done.set_run_id(leased.run_id());
    done.set_attempt(leased.attempt());
    for (int64_t s = steps / 4; s <= steps; s += steps / 4) {
      *done.add_points() = Point(s, steps, 3.0 + 4.0 / std::sqrt(s + 1.0));
    }
    done.set_result_json(absl::StrCat(
        R"({"val_nats_per_byte":)", loss, R"(,"val_nats_per_token":)", 2.5 * loss,
        R"(,"train_seconds":)", seconds, R"(,"steps":)", steps,
        R"(,"params":)", run.run().variant() == "wide" ? 20000 : 16000,
        R"(,"tokens_per_s":5000,"device_class":"cpu-test"})"));
    v1::CompleteResponse done_response;
    if (grpc::Status s = worker->Complete(Ctx().get(), done, &done_response); !s.ok()) {
      return Fail("complete", s);
    }
  }
  if (grpc::Status s = submit(RunningGrid(data)); !s.ok()) return Fail("submit running", s);
  v1::LeaseResponse running;
  if (grpc::Status s = lease(&running); !s.ok() || !running.leased()) {
    return Fail("lease running", s);
  }
  // Seed 2 diverges on every attempt until it fails for good.
  int64_t failed_run = 0;
  int attempts = 0;
  while (true) {
    v1::LeaseResponse leased;
    if (grpc::Status s = lease(&leased); !s.ok()) return Fail("lease", s);
    if (!leased.leased()) break;
    failed_run = leased.run_id();
    ++attempts;
    v1::HeartbeatRequest points;
    points.set_worker_id("w1");
    points.set_run_id(leased.run_id());
    points.set_attempt(leased.attempt());
    for (int64_t s : {10, 20, 30}) *points.add_points() = Point(s, 1000, 5.0 - 0.01 * s);
    *points.add_points() = Point(40, 1000, NAN);
    v1::HeartbeatResponse beat_response;
    if (grpc::Status s = worker->Heartbeat(Ctx().get(), points, &beat_response); !s.ok()) {
      return Fail("heartbeat", s);
    }
    v1::FailRequest fail;
    fail.set_worker_id("w1");
    fail.set_run_id(leased.run_id());
    fail.set_attempt(leased.attempt());
    fail.set_failure_class(v1::FAILURE_CLASS_ENGINE_ERROR);
    fail.set_message(
        "the training child exited with status 1: step 30: loss 4.7000\n"
        "training diverged: loss is nan at step 40 (lower --lr?)");
    v1::FailResponse fail_response;
    if (grpc::Status s = worker->Fail(Ctx().get(), fail, &fail_response); !s.ok()) {
      return Fail("fail", s);
    }
  }
  int64_t step = 0;
  auto beat = [&]() {
    v1::HeartbeatRequest request;
    request.set_worker_id("w1");
    request.set_run_id(running.run_id());
    request.set_attempt(running.attempt());
    step += 10;
    v1::Progress* p = request.add_points();
    *p = Point(step, 1000, 3.0 + 4.0 / std::sqrt(step + 1.0));
    p->set_max_over_mean_load(1.25);
    for (double n : {96.0, 160.0, 128.0, 128.0}) p->add_tokens_per_expert(n);
    v1::HeartbeatResponse response;
    return worker->Heartbeat(Ctx().get(), request, &response);
  };
  for (int i = 0; i < 5; ++i) {
    if (grpc::Status s = beat(); !s.ok()) return Fail("heartbeat", s);
  }
  std::cout << "seeded finished running run=" << running.run_id() << " failed=" << failed_run
            << " attempts=" << attempts << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line != "beat") continue;
    if (grpc::Status s = beat(); !s.ok()) return Fail("heartbeat", s);
    std::cout << "beat " << step << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) { return smallem::Main(argc, argv); }
