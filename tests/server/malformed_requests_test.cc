// Every rpc of both services, given malformed requests — huge strings,
// negative or absurd numbers, unknown enum values, wrong attempt numbers,
// missing and unknown ids — answers INVALID_ARGUMENT, FAILED_PRECONDITION or
// NOT_FOUND: never OK, never INTERNAL or UNKNOWN, never a crash. One table;
// a new rpc gets its rows here (EveryRpcHasARow checks that none is left out).
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "tests/server/coordinator_fixture.h"

namespace smallem {
namespace {

using testing::Context;

// A string larger than any field allows, well under gRPC's message cap.
const std::string& Huge() {
  static const std::string huge(1 << 20, 'x');
  return huge;
}

struct Row {
  std::string rpc;   // the service's method, as in the proto
  std::string what;  // what is wrong with the request
  std::function<grpc::Status()> call;
};

class MalformedRequestsTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    v1::SubmitResponse submitted;
    UploadAndSubmit(1, 2, &submitted);
    lease_ = Lease();  // worker w1 holds run lease_.run_id(), attempt 1
    ASSERT_TRUE(lease_.leased());
  }

  // Rows for ClientService.
  std::vector<Row> ClientRows() {
    std::vector<Row> rows;
    auto add = [&](std::string rpc, std::string what, std::function<grpc::Status()> call) {
      rows.push_back(Row{std::move(rpc), std::move(what), std::move(call)});
    };
    auto has = [this](std::string hash) {
      return [this, hash] {
        v1::HasDatasetRequest r;
        r.set_content_hash(hash);
        v1::HasDatasetResponse out;
        return client_->HasDataset(Context().get(), r, &out);
      };
    };
    add("HasDataset", "no hash", has(""));
    add("HasDataset", "huge hash", has(Huge()));
    add("HasDataset", "not hex", has(std::string(64, 'z')));

    auto upload = [this](std::function<void(v1::DatasetChunk&)> edit) {
      return [this, edit] {
        v1::DatasetChunk chunk;
        chunk.set_content_hash(std::string(64, 'a'));
        chunk.set_file_name("train.bin");
        chunk.set_file_size(4);
        chunk.set_offset(0);
        chunk.set_data("abcd");
        edit(chunk);
        grpc::ClientContext context;
        v1::UploadDatasetResponse out;
        auto writer = client_->UploadDataset(&context, &out);
        writer->Write(chunk);
        writer->WritesDone();
        return writer->Finish();
      };
    };
    add("UploadDataset", "no chunk at all", [this] {
      grpc::ClientContext context;
      v1::UploadDatasetResponse out;
      auto writer = client_->UploadDataset(&context, &out);
      writer->WritesDone();
      return writer->Finish();
    });
    add("UploadDataset", "negative offset", upload([](auto& c) { c.set_offset(-4); }));
    add("UploadDataset", "negative size", upload([](auto& c) { c.set_file_size(-1); }));
    add("UploadDataset", "absurd size",
        upload([](auto& c) { c.set_file_size(std::numeric_limits<int64_t>::max()); }));
    add("UploadDataset", "offset past the end", upload([](auto& c) { c.set_offset(1 << 30); }));
    add("UploadDataset", "a path for a name", upload([](auto& c) { c.set_file_name("../x"); }));
    add("UploadDataset", "huge name", upload([](auto& c) { c.set_file_name(Huge()); }));
    add("UploadDataset", "huge hash", upload([](auto& c) { c.set_content_hash(Huge()); }));

    auto submit = [this](std::string yaml, std::function<void(v1::SubmitRequest&)> edit) {
      return [this, yaml, edit] {
        v1::SubmitRequest r;
        r.set_grid_yaml(yaml);
        r.set_grid_file_name("grid.yaml");
        (*r.mutable_dataset_hashes())[data_dir_] = hash_;
        edit(r);
        v1::SubmitResponse out;
        return client_->Submit(Context().get(), r, &out);
      };
    };
    const std::string good = testing::MakeGridYaml("bad", data_dir_, 1, 1);
    auto none = [](v1::SubmitRequest&) {};
    add("Submit", "empty grid", submit("", none));
    add("Submit", "huge grid", submit(good + "# " + std::string(5 << 20, 'x'), none));
    add("Submit", "huge file name", submit(good, [](auto& r) { r.set_grid_file_name(Huge()); }));
    add("Submit", "negative retry budget", submit(good, [](auto& r) { r.set_retry_budget(-1); }));
    add("Submit", "absurd retry budget",
        submit(good, [](auto& r) { r.set_retry_budget(std::numeric_limits<int32_t>::max()); }));
    add("Submit", "negative steps", submit(testing::MakeGridYaml("bad", data_dir_, 1, 1, -5), none));
    add("Submit", "absurd steps",
        submit(testing::MakeGridYaml("bad", data_dir_, 1, 1, 0) + "budget: {steps: 1e30}\n", none));
    add("Submit", "no dataset hash", submit(good, [](auto& r) { r.clear_dataset_hashes(); }));
    add("Submit", "not YAML", submit("{[", none));

    add("ListExperiments", "negative limit", [this] {
      v1::ListExperimentsRequest r;
      r.set_limit(-1);
      v1::ListExperimentsResponse out;
      return client_->ListExperiments(Context().get(), r, &out);
    });

    auto get_experiment = [this](int64_t id, std::string name) {
      return [this, id, name] {
        v1::GetExperimentRequest r;
        r.set_experiment_id(id);
        r.set_name(name);
        v1::GetExperimentResponse out;
        return client_->GetExperiment(Context().get(), r, &out);
      };
    };
    add("GetExperiment", "neither id nor name", get_experiment(0, ""));
    add("GetExperiment", "negative id", get_experiment(-3, ""));
    add("GetExperiment", "unknown id", get_experiment(999, ""));
    add("GetExperiment", "huge name", get_experiment(0, Huge()));

    auto get_run = [this](int64_t id) {
      return [this, id] {
        v1::GetRunRequest r;
        r.set_run_id(id);
        v1::GetRunResponse out;
        return client_->GetRun(Context().get(), r, &out);
      };
    };
    add("GetRun", "no id", get_run(0));
    add("GetRun", "negative id", get_run(-1));
    add("GetRun", "unknown id", get_run(123456));

    auto stream = [this](int64_t run, int64_t after) {
      return [this, run, after] {
        v1::StreamMetricsRequest r;
        r.set_run_id(run);
        r.set_after_step(after);
        grpc::ClientContext context;
        auto reader = client_->StreamMetrics(&context, r);
        v1::StreamMetricsResponse out;
        while (reader->Read(&out)) {
        }
        return reader->Finish();
      };
    };
    add("StreamMetrics", "no run", stream(0, -1));
    add("StreamMetrics", "unknown run", stream(123456, -1));
    add("StreamMetrics", "after_step below -1", stream(lease_.run_id(), -7));

    auto cancel = [this](int64_t experiment, std::vector<int64_t> runs) {
      return [this, experiment, runs] {
        v1::CancelRequest r;
        r.set_experiment_id(experiment);
        for (int64_t id : runs) r.add_run_ids(id);
        v1::CancelResponse out;
        return client_->Cancel(Context().get(), r, &out);
      };
    };
    add("Cancel", "nothing selected", cancel(0, {}));
    add("Cancel", "negative experiment", cancel(-2, {}));
    add("Cancel", "negative run id", cancel(0, {-5}));
    add("Cancel", "unknown experiment", cancel(999, {}));
    auto retry = [this](int64_t experiment, std::vector<int64_t> runs) {
      return [this, experiment, runs] {
        v1::RetryRequest r;
        r.set_experiment_id(experiment);
        for (int64_t id : runs) r.add_run_ids(id);
        v1::RetryResponse out;
        return client_->Retry(Context().get(), r, &out);
      };
    };
    add("Retry", "nothing selected", retry(0, {}));
    add("Retry", "negative run id", retry(0, {-5}));
    add("Retry", "unknown experiment", retry(999, {}));
    auto remove = [this](int64_t experiment, std::string name) {
      return [this, experiment, name] {
        v1::DeleteExperimentRequest r;
        r.set_experiment_id(experiment);
        r.set_name(name);
        v1::DeleteExperimentResponse out;
        return client_->DeleteExperiment(Context().get(), r, &out);
      };
    };
    add("DeleteExperiment", "nothing selected", remove(0, ""));
    add("DeleteExperiment", "unknown experiment", remove(999, ""));
    add("DeleteExperiment", "a run still leased, without force", remove(0, "exp"));

    auto report = [this](std::function<void(v1::ReportRequest&)> edit) {
      return [this, edit] {
        v1::ReportRequest r;
        r.set_name("exp");
        edit(r);
        v1::ReportResponse out;
        return client_->Report(Context().get(), r, &out);
      };
    };
    add("Report", "no experiment", report([](auto& r) { r.clear_name(); }));
    add("Report", "unknown name", report([](auto& r) { r.set_name("nope"); }));
    add("Report", "unknown `at`", report([](auto& r) { r.set_at(static_cast<v1::ReportAt>(99)); }));
    add("Report", "unknown format",
        report([](auto& r) { r.set_format(static_cast<v1::ReportFormat>(42)); }));
    add("Report", "negative floor", report([](auto& r) { r.set_noise_floor(-1); }));
    add("Report", "NaN floor", report([](auto& r) { r.set_noise_floor(std::nan("")); }));
    add("Report", "absurd floor", report([](auto& r) { r.set_noise_floor(1e300); }));

    auto workers = [this](int64_t within, int32_t limit) {
      return [this, within, limit] {
        v1::ListWorkersRequest r;
        r.set_seen_within_ms(within);
        r.set_limit(limit);
        v1::ListWorkersResponse out;
        return client_->ListWorkers(Context().get(), r, &out);
      };
    };
    add("ListWorkers", "negative window", workers(-1, 0));
    add("ListWorkers", "negative limit", workers(0, -1));
    add("ListWorkers", "absurd limit", workers(0, std::numeric_limits<int32_t>::max()));

    return rows;
  }

  // Rows for WorkerService.
  std::vector<Row> WorkerRows() {
    std::vector<Row> rows;
    auto add = [&](std::string rpc, std::string what, std::function<grpc::Status()> call) {
      rows.push_back(Row{std::move(rpc), std::move(what), std::move(call)});
    };
    auto reg = [this](std::function<void(v1::RegisterRequest&)> edit) {
      return [this, edit] {
        v1::RegisterRequest r = testing::CpuRegistration();
        r.set_worker_id("w2");
        edit(r);
        v1::RegisterResponse out;
        return worker_->Register(Context().get(), r, &out);
      };
    };
    add("Register", "no worker id", reg([](auto& r) { r.clear_worker_id(); }));
    add("Register", "huge worker id", reg([](auto& r) { r.set_worker_id(Huge()); }));
    add("Register", "huge hostname", reg([](auto& r) { r.set_hostname(Huge()); }));
    add("Register", "no devices", reg([](auto& r) { r.clear_devices(); }));
    add("Register", "huge device name",
        reg([](auto& r) { r.mutable_devices(0)->set_name(Huge()); }));
    add("Register", "negative memory",
        reg([](auto& r) { r.mutable_devices(0)->set_memory_bytes(-1); }));

    auto lease = [this](std::string worker, std::string device) {
      return [this, worker, device] {
        v1::LeaseRequest r;
        r.set_worker_id(worker);
        r.set_device(device);
        r.set_device_class("cpu-test");
        v1::LeaseResponse out;
        return worker_->Lease(Context().get(), r, &out);
      };
    };
    add("Lease", "unregistered worker", lease("stranger", "cpu"));
    add("Lease", "no device", lease("w1", ""));
    add("Lease", "huge device", lease("w1", Huge()));
    add("Lease", "no worker id", lease("", "cpu"));

    auto beat = [this](std::function<void(v1::HeartbeatRequest&)> edit) {
      return [this, edit] {
        v1::HeartbeatRequest r;
        r.set_worker_id("w1");
        r.set_run_id(lease_.run_id());
        r.set_attempt(lease_.attempt());
        edit(r);
        v1::HeartbeatResponse out;
        return worker_->Heartbeat(Context().get(), r, &out);
      };
    };
    add("Heartbeat", "wrong attempt", beat([this](auto& r) { r.set_attempt(lease_.attempt() + 5); }));
    add("Heartbeat", "negative attempt", beat([](auto& r) { r.set_attempt(-1); }));
    add("Heartbeat", "no run", beat([](auto& r) { r.set_run_id(0); }));
    add("Heartbeat", "unknown run", beat([](auto& r) { r.set_run_id(123456); }));
    add("Heartbeat", "another worker", beat([](auto& r) { r.set_worker_id("w9"); }));
    add("Heartbeat", "huge worker id", beat([](auto& r) { r.set_worker_id(Huge()); }));
    add("Heartbeat", "negative step", beat([](auto& r) { r.add_points()->set_step(-3); }));

    auto complete = [this](std::function<void(v1::CompleteRequest&)> edit) {
      return [this, edit] {
        v1::CompleteRequest r;
        r.set_worker_id("w1");
        r.set_run_id(lease_.run_id());
        r.set_attempt(lease_.attempt());
        r.set_result_json(R"({"val_nats_per_byte":1.25,"train_seconds":3.0,"params":1000,)"
                          R"("device_class":"cpu-test"})");
        edit(r);
        v1::CompleteResponse out;
        return worker_->Complete(Context().get(), r, &out);
      };
    };
    add("Complete", "wrong attempt", complete([this](auto& r) { r.set_attempt(lease_.attempt() + 1); }));
    add("Complete", "no attempt", complete([](auto& r) { r.set_attempt(0); }));
    add("Complete", "unknown run", complete([](auto& r) { r.set_run_id(123456); }));
    add("Complete", "not JSON", complete([](auto& r) { r.set_result_json("{"); }));
    add("Complete", "huge result", complete([](auto& r) { r.set_result_json(Huge() + Huge()); }));
    add("Complete", "a non-finite loss",
        complete([](auto& r) { r.set_result_json(R"({"val_nats_per_byte":"nan"})"); }));

    auto fail = [this](std::function<void(v1::FailRequest&)> edit) {
      return [this, edit] {
        v1::FailRequest r;
        r.set_worker_id("w1");
        r.set_run_id(lease_.run_id());
        r.set_attempt(lease_.attempt());
        r.set_failure_class(v1::FAILURE_CLASS_ENGINE_ERROR);
        r.set_message("boom");
        edit(r);
        v1::FailResponse out;
        return worker_->Fail(Context().get(), r, &out);
      };
    };
    add("Fail", "unknown failure class",
        fail([](auto& r) { r.set_failure_class(static_cast<v1::FailureClass>(77)); }));
    add("Fail", "no failure class",
        fail([](auto& r) { r.set_failure_class(v1::FAILURE_CLASS_UNSPECIFIED); }));
    add("Fail", "wrong attempt", fail([this](auto& r) { r.set_attempt(lease_.attempt() + 3); }));
    add("Fail", "unknown run", fail([](auto& r) { r.set_run_id(123456); }));
    add("Fail", "diverged without a step",
        fail([](auto& r) { r.set_failure_class(v1::FAILURE_CLASS_DIVERGED); }));
    add("Fail", "diverged at a negative step", fail([](auto& r) {
          r.set_failure_class(v1::FAILURE_CLASS_DIVERGED);
          r.set_diverged_step(-4);
        }));

    auto fetch = [this](std::string hash) {
      return [this, hash] {
        v1::FetchDatasetRequest r;
        r.set_content_hash(hash);
        grpc::ClientContext context;
        auto reader = worker_->FetchDataset(&context, r);
        v1::DatasetChunk chunk;
        while (reader->Read(&chunk)) {
        }
        return reader->Finish();
      };
    };
    add("FetchDataset", "no hash", fetch(""));
    add("FetchDataset", "unknown hash", fetch(std::string(64, 'b')));
    add("FetchDataset", "huge hash", fetch(Huge()));

    auto release = [this](std::function<void(v1::ReleaseRequest&)> edit) {
      return [this, edit] {
        v1::ReleaseRequest r;
        r.set_worker_id("w1");
        r.set_run_id(lease_.run_id());
        r.set_attempt(lease_.attempt());
        r.set_reason("stopping");
        edit(r);
        v1::ReleaseResponse out;
        return worker_->Release(Context().get(), r, &out);
      };
    };
    add("Release", "wrong attempt", release([this](auto& r) { r.set_attempt(lease_.attempt() + 2); }));
    add("Release", "unknown run", release([](auto& r) { r.set_run_id(123456); }));
    add("Release", "another worker", release([](auto& r) { r.set_worker_id("w9"); }));

    auto upload = [this](std::function<void(v1::CheckpointChunk&)> edit) {
      return [this, edit] {
        v1::CheckpointChunk chunk;
        chunk.set_worker_id("w1");
        chunk.set_run_id(lease_.run_id());
        chunk.set_attempt(lease_.attempt());
        chunk.set_step(1);
        chunk.set_sha256(std::string(64, 'a'));
        chunk.set_file_size(4);
        chunk.set_offset(0);
        chunk.set_data("abcd");
        edit(chunk);
        grpc::ClientContext context;
        v1::UploadCheckpointResponse out;
        auto writer = worker_->UploadCheckpoint(&context, &out);
        writer->Write(chunk);
        writer->WritesDone();
        return writer->Finish();
      };
    };
    add("UploadCheckpoint", "wrong attempt",
        upload([this](auto& c) { c.set_attempt(lease_.attempt() + 4); }));
    add("UploadCheckpoint", "unknown run", upload([](auto& c) { c.set_run_id(123456); }));
    add("UploadCheckpoint", "not hex", upload([](auto& c) { c.set_sha256(std::string(64, 'z')); }));
    add("UploadCheckpoint", "negative offset", upload([](auto& c) { c.set_offset(-8); }));
    add("UploadCheckpoint", "data past the file's end", upload([](auto& c) { c.set_offset(2); }));

    auto fetch_checkpoint = [this](std::function<void(v1::FetchCheckpointRequest&)> edit) {
      return [this, edit] {
        v1::FetchCheckpointRequest r;
        r.set_worker_id("w1");
        r.set_run_id(lease_.run_id());
        r.set_attempt(lease_.attempt());
        edit(r);
        grpc::ClientContext context;
        auto reader = worker_->FetchCheckpoint(&context, r);
        v1::CheckpointChunk chunk;
        while (reader->Read(&chunk)) {
        }
        return reader->Finish();
      };
    };
    add("FetchCheckpoint", "none stored", fetch_checkpoint([](auto&) {}));
    add("FetchCheckpoint", "unknown run", fetch_checkpoint([](auto& r) { r.set_run_id(123456); }));
    add("FetchCheckpoint", "wrong attempt",
        fetch_checkpoint([this](auto& r) { r.set_attempt(lease_.attempt() + 6); }));
    return rows;
  }

  v1::LeaseResponse lease_;
};

bool Acceptable(grpc::StatusCode code) {
  return code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::FAILED_PRECONDITION || code == grpc::StatusCode::NOT_FOUND;
}

TEST_F(MalformedRequestsTest, EveryRpcRefusesMalformedRequestsClearly) {
  std::vector<Row> rows = ClientRows();
  for (Row& row : WorkerRows()) rows.push_back(std::move(row));
  for (const Row& row : rows) {
    const grpc::Status status = row.call();
    EXPECT_TRUE(Acceptable(status.error_code()))
        << row.rpc << " (" << row.what << "): code " << status.error_code() << ": "
        << status.error_message().substr(0, 300);
    // Messages say what is wrong without echoing a huge field whole.
    EXPECT_LT(status.error_message().size(), 4096u) << row.rpc << " (" << row.what << ")";
  }
  // Still serving, and the lease the refused writes named is intact.
  v1::GetRunRequest get;
  get.set_run_id(lease_.run_id());
  v1::GetRunResponse run;
  ASSERT_TRUE(client_->GetRun(Context().get(), get, &run).ok());
  EXPECT_EQ(run.run().status(), v1::RUN_STATUS_LEASED);
  EXPECT_EQ(run.run().attempt(), lease_.attempt());
}

// Every rpc of both services has at least one row.
TEST_F(MalformedRequestsTest, EveryRpcHasARow) {
  std::set<std::string> covered;
  for (const Row& row : ClientRows()) covered.insert(row.rpc);
  for (const Row& row : WorkerRows()) covered.insert(row.rpc);
  // BackupRequest has no fields: no request to it is malformed.
  covered.insert("Backup");
  std::set<std::string> rpcs;
  for (const char* name : {"smallem.v1.ClientService", "smallem.v1.WorkerService"}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) rpcs.insert(service->method(i)->name());
  }
  EXPECT_EQ(covered, rpcs);
}

}  // namespace
}  // namespace smallem
