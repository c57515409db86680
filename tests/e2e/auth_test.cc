// Tokens with the real binaries: smallem-coordinator reading its token
// files, smallemctl and smallem-worker sending theirs.
#include <stdlib.h>

#include <chrono>
#include <thread>

#include "corpus/dataset.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"
#include "runspec/grid.h"
#include "server/service/coordinator.h"
#include "tests/e2e/e2e_support.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem {
namespace {

using testing::TempDir;

constexpr char kWorkerToken[] = "e2e-worker-token";
constexpr char kClientToken[] = "e2e-client-token";

class AuthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
    testing::WriteFile(dir_.Join("worker.token"), std::string(kWorkerToken) + "\n");
    testing::WriteFile(dir_.Join("client.token"), std::string(kClientToken) + "\n");
  }

  // Runs `program` until it exits; its stdout lines (spdlog's too) joined.
  static std::string RunToExit(const std::string& program, const std::vector<std::string>& args,
                               ChildExit* exit) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Spawn(program, args);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "";
    std::vector<std::string> lines;
    while ((*p)->Poll(100, &lines)) {
    }
    *exit = (*p)->Wait();
    return absl::StrJoin(lines, "\n") + (*p)->last_stderr_line();
  }

  TempDir dir_;
};

TEST_F(AuthE2eTest, CoordinatorBinaryRequiresTheTokensFromItsFiles) {
  absl::StatusOr<testing::CoordinatorProcess> coordinator = testing::StartCoordinatorProcess(
      {"--db", dir_.Join("smallem.db"), "--worker-token-file", dir_.Join("worker.token"),
       "--client-token-file", dir_.Join("client.token")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = coordinator->address;
  auto client = v1::ClientService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));

  v1::ListWorkersResponse response;
  grpc::Status status = client->ListWorkers(testing::Context().get(), {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  auto context = testing::Context();
  AttachToken(kClientToken, context.get());
  status = client->ListWorkers(context.get(), {}, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();

  // smallemctl: refused without a token, let in with $SMALLEM_CLIENT_TOKEN.
  testing::CtlOutput refused = testing::RunCtl({"workers", "--coordinator", address});
  EXPECT_EQ(refused.exit.exit_code, 1);
  EXPECT_NE(refused.last_error.find("client token"), std::string::npos) << refused.last_error;
  setenv(kClientTokenEnv, kClientToken, 1);
  testing::CtlOutput let_in = testing::RunCtl({"workers", "--coordinator", address});
  unsetenv(kClientTokenEnv);
  EXPECT_EQ(let_in.exit.exit_code, 0) << let_in.last_error;
}

TEST_F(AuthE2eTest, EmptyTokenFileStopsTheCoordinatorAndNamesTheFile) {
  testing::WriteFile(dir_.Join("empty.token"), "\n");
  ChildExit exit;
  const std::string out = RunToExit(
      testing::CoordinatorBinary(),
      {"--listen", "127.0.0.1:0", "--db", dir_.Join("smallem.db"), "--client-token-file",
       dir_.Join("empty.token")},
      &exit);
  EXPECT_EQ(exit.exit_code, 2) << out;
  EXPECT_NE(out.find(dir_.Join("empty.token")), std::string::npos) << out;
}

// Enable once worker/daemon.cc builds its CoordinatorClient with
// options_.security (WorkerOptions::security is filled by --token-file).
TEST_F(AuthE2eTest, WorkerWithTokenFileTrainsARun) {
  const std::string data = dir_.Join("data");
  ASSERT_TRUE(testing::PrepareTinyDataset(dir_.path(), data).ok());
  const std::string hash = Dataset::Open(data)->content_hash();
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.queue.heartbeat_interval_ms = 200;
  options.security.worker_token = kWorkerToken;  // the client service stays open
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = (*coordinator)->address();

  auto client = v1::ClientService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(testing::UploadDirectory(*client, data, hash, 64 << 10).ok());
  const std::string yaml = testing::TinyGridYaml("auth", data, 1, 1, 20);
  v1::SubmitRequest request;
  request.set_grid_yaml(yaml);
  request.set_grid_file_name("grid.yaml");
  (*request.mutable_dataset_hashes())[ParseGrid(yaml, "grid.yaml")->data_dir] = hash;
  v1::SubmitResponse submitted;
  ASSERT_TRUE(client->Submit(testing::Context().get(), request, &submitted).ok());

  absl::StatusOr<std::unique_ptr<ChildProcess>> worker = ChildProcess::Spawn(
      testing::WorkerBinary(),
      {"--coordinator", address, "--devices", "cpu", "--cache", dir_.Join("cache"), "--threads",
       "1", "--log-level", "warn", "--token-file", dir_.Join("worker.token")});
  ASSERT_TRUE(worker.ok()) << worker.status();
  bool done = false;
  for (int i = 0; i < 60 * 20 && !done; ++i) {
    done = (*coordinator)->store().GetRun(1)->status == RunStatus::kSucceeded;
    std::vector<std::string> lines;
    (*worker)->Poll(0, &lines);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(done) << "the worker never finished the run; last stderr: "
                    << (*worker)->last_stderr_line();
  (*worker)->Kill();
}

TEST_F(AuthE2eTest, WorkerWithAWrongTokenStopsAndSaysWhatToFix) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir_.Join("smallem.db");
  options.security.worker_token = kWorkerToken;
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator = Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  testing::WriteFile(dir_.Join("wrong.token"), "not-the-worker-token\n");
  ChildExit exit;
  const std::string out = RunToExit(
      testing::WorkerBinary(),
      {"--coordinator", (*coordinator)->address(), "--devices", "cpu", "--cache",
       dir_.Join("cache"), "--threads", "1", "--token-file", dir_.Join("wrong.token")},
      &exit);
  EXPECT_NE(exit.exit_code, 0);  // it exits instead of retrying forever
  EXPECT_NE(out.find("refused this worker"), std::string::npos) << out;
  EXPECT_NE(out.find("--token-file"), std::string::npos) << out;
}

// Enable once cli/service_commands.cc's Connect passes args.token_file and
// args.tls_ca to ServiceClient.
TEST_F(AuthE2eTest, SmallemctlWithTokenFileReachesAProtectedCoordinator) {
  absl::StatusOr<testing::CoordinatorProcess> coordinator = testing::StartCoordinatorProcess(
      {"--db", dir_.Join("smallem.db"), "--client-token-file", dir_.Join("client.token")});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  testing::CtlOutput o = testing::RunCtl({"workers", "--coordinator", coordinator->address,
                                          "--token-file", dir_.Join("client.token")});
  EXPECT_EQ(o.exit.exit_code, 0) << o.last_error;
}

}  // namespace
}  // namespace smallem
