// The bounds on the coordinator's transfer streams (server/service/
// stream_gate.h), through a real Coordinator on 127.0.0.1 port 0: at most
// so many UploadCheckpoint streams at once (UploadDataset has a cap of its
// own), and a stream that sits idle is ended by the server.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "base/sha256.h"
#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "smallem/v1/worker.grpc.pb.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

// The first chunk of a checkpoint of `file_size` bytes for `lease`.
v1::CheckpointChunk FirstChunk(const v1::LeaseResponse& lease, const std::string& worker,
                               int64_t file_size = 1 << 20) {
  v1::CheckpointChunk chunk;
  chunk.set_worker_id(worker);
  chunk.set_run_id(lease.run_id());
  chunk.set_attempt(lease.attempt());
  chunk.set_step(10);
  chunk.set_sha256(Sha256Hex("a checkpoint"));
  chunk.set_file_size(file_size);
  chunk.set_data("the first bytes");
  return chunk;
}

// Whether `done` came to hold within two minutes (a bound on a broken
// server, not a measure of a working one).
template <typename F>
bool WaitUntil(F done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class TransferLimitsTest : public CoordinatorTest {
 protected:
  grpc::Status UploadOneChunk(const v1::LeaseResponse& lease, const std::string& worker) {
    grpc::ClientContext context;
    v1::UploadCheckpointResponse response;
    auto writer = worker_->UploadCheckpoint(&context, &response);
    writer->Write(FirstChunk(lease, worker));
    writer->WritesDone();
    return writer->Finish();
  }

  // Chunks of an unfinished dataset upload, `mib` MiB in all: pages for a
  // backup to copy.
  void FillDatabase(int mib) {
    const std::string data(1 << 20, 'd');
    for (int i = 0; i < mib; ++i) {
      ASSERT_TRUE(coordinator_->store()
                      .PutDatasetChunk(Sha256Hex("filler"),
                                       {.file_name = "train.bin",
                                        .file_size = int64_t{mib} << 20,
                                        .offset = int64_t{i} << 20, .length = 1 << 20},
                                       data, clock_.NowUnixMs())
                      .ok());
    }
  }

  bool BackupCopyLeft() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      if (absl::StrContains(entry.path().filename().string(), ".backup-")) return true;
    }
    return false;
  }
};

TEST_F(TransferLimitsTest, AStreamPastTheCapIsRefusedUntilOneEnds) {
  Restart({.transfer_streams = {.max_streams = 1, .idle = absl::Minutes(10)}});
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 2, &submitted);
  const v1::LeaseResponse first = Lease("w1"), second = Lease("w2");
  grpc::ClientContext open_context;
  v1::UploadCheckpointResponse open_response;
  auto open_writer = worker_->UploadCheckpoint(&open_context, &open_response);
  ASSERT_TRUE(open_writer->Write(FirstChunk(first, "w1")));
  ASSERT_TRUE(WaitUntil([&] {
    return !coordinator_->store().ListCheckpointChunks(first.run_id(), Sha256Hex("a checkpoint"))
                ->empty();
  }));
  const grpc::Status refused = UploadOneChunk(second, "w2");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("1 UploadCheckpoint stream is open"), std::string::npos)
      << refused.error_message();
  // Dataset uploads have a cap of their own: one is admitted meanwhile.
  EXPECT_TRUE(testing::UploadDirectory(*client_, data_dir_, hash_).ok());
  // Once the open stream ends, the next is admitted (and is incomplete).
  open_writer->WritesDone();
  EXPECT_EQ(open_writer->Finish().error_code(), grpc::StatusCode::DATA_LOSS);
  const grpc::Status admitted = UploadOneChunk(second, "w2");
  EXPECT_EQ(admitted.error_code(), grpc::StatusCode::DATA_LOSS) << admitted.error_message();
}

TEST_F(TransferLimitsTest, AnIdleUploadIsEndedByTheServerAndLeavesNothing) {
  Restart({.transfer_streams = {.max_streams = 1, .idle = absl::Milliseconds(200)}});
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  const v1::LeaseResponse lease = Lease("w1");
  // One chunk, then nothing: without the server's idle limit the stream
  // would stay open until the client's own deadline.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
  v1::UploadCheckpointResponse response;
  auto writer = worker_->UploadCheckpoint(&context, &response);
  ASSERT_TRUE(writer->Write(FirstChunk(lease, "w1")));
  const grpc::Status ended = writer->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::CANCELLED) << ended.error_message();
  // The client hears of the cancel first; the handler then drops what the
  // stream stored and gives its place back.
  EXPECT_TRUE(WaitUntil([&] {
    return coordinator_->store()
        .ListCheckpointChunks(lease.run_id(), Sha256Hex("a checkpoint"))
        ->empty();
  })) << "the idle upload's chunk was kept";
  grpc::Status next;
  EXPECT_TRUE(WaitUntil([&] {
    next = UploadOneChunk(lease, "w1");
    return next.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
  })) << "the idle upload's place was not given back";
  EXPECT_EQ(next.error_code(), grpc::StatusCode::DATA_LOSS) << next.error_message();
}

TEST_F(TransferLimitsTest, ABackupReaderThatStopsIsEndedByTheServerAndItsCopyRemoved) {
  Restart({.transfer_streams = {.max_streams = 8, .idle = absl::Milliseconds(300)}});
  FillDatabase(48);
  // The client reads one chunk and then nothing: the server cannot send
  // 48 MiB into the stream's window, and ends the stream when it has
  // written nothing for the idle limit.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
  auto stalled = client_->Backup(&context, v1::BackupRequest());
  v1::BackupChunk chunk;
  ASSERT_TRUE(stalled->Read(&chunk));
  // Not read until the server has given up: the stream's end waits
  // behind the chunks buffered for it.
  EXPECT_TRUE(WaitUntil([&] { return !BackupCopyLeft(); })) << "the stalled backup is still open";
  while (stalled->Read(&chunk)) {
  }
  const grpc::Status ended = stalled->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::CANCELLED) << ended.error_message();
}

}  // namespace
}  // namespace smallem
