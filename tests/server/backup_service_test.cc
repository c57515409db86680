// Backup through a real Coordinator on 127.0.0.1 port 0 (its server-side
// limits; tests/e2e/backup_test.cc restores a copy): one at a time, room
// checked before copying, a deadline, and no copy left behind.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "base/sha256.h"
#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

class BackupServiceTest : public CoordinatorTest {
 protected:
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

  bool CopyLeft() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      if (absl::StrContains(entry.path().filename().string(), ".backup-")) return true;
    }
    return false;
  }

  // Reads a whole Backup stream; returns its status and the bytes received.
  grpc::Status ReadBackup(int64_t* received = nullptr) {
    grpc::ClientContext context;
    auto reader = client_->Backup(&context, v1::BackupRequest());
    v1::BackupChunk chunk;
    int64_t bytes = 0, total = -1;
    while (reader->Read(&chunk)) {
      total = chunk.total_bytes();
      bytes += static_cast<int64_t>(chunk.data().size());
    }
    grpc::Status status = reader->Finish();
    if (status.ok()) EXPECT_EQ(bytes, total);
    if (received != nullptr) *received = bytes;
    return status;
  }
};

TEST_F(BackupServiceTest, OneBackupAtATime) {
  FillDatabase(48);
  // A backup whose client reads one chunk and then waits: the server
  // cannot send 48 MiB into the stream's window, so it is under way.
  grpc::ClientContext stalled_context;
  auto stalled = client_->Backup(&stalled_context, v1::BackupRequest());
  v1::BackupChunk chunk;
  ASSERT_TRUE(stalled->Read(&chunk));
  EXPECT_GT(chunk.total_bytes(), int64_t{48} << 20);
  const grpc::Status refused = ReadBackup();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("a backup is under way"), std::string::npos)
      << refused.error_message();
  // Once the first ends, its copy is gone and the next backup is whole.
  stalled_context.TryCancel();
  while (stalled->Read(&chunk)) {
  }
  EXPECT_EQ(stalled->Finish().error_code(), grpc::StatusCode::CANCELLED);
  int64_t received = 0;
  grpc::Status whole = ReadBackup(&received);
  // The server learns of the cancel on its own time.
  while (whole.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    whole = ReadBackup(&received);
  }
  EXPECT_TRUE(whole.ok()) << whole.error_message();
  EXPECT_GT(received, int64_t{48} << 20);
  EXPECT_FALSE(CopyLeft());
}

TEST_F(BackupServiceTest, ABackupThatWouldEatTheDiskReserveIsRefusedBeforeCopying) {
  Restart({.min_free_disk_bytes = int64_t{1} << 62});  // more than any disk has
  const grpc::Status refused = ReadBackup();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("--min-free-disk-gb"), std::string::npos)
      << refused.error_message();
  EXPECT_FALSE(CopyLeft());
}

TEST_F(BackupServiceTest, ABackupPastTheServersDeadlineIsEndedAndItsCopyRemoved) {
  Restart({.backup_deadline = absl::Milliseconds(1)});
  FillDatabase(8);  // some steps of copying: each waits a moment for other calls
  const grpc::Status late = ReadBackup();
  EXPECT_EQ(late.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << late.error_message();
  EXPECT_NE(late.error_message().find("took longer than the coordinator allows"),
            std::string::npos)
      << late.error_message();
  EXPECT_FALSE(CopyLeft());
}

TEST_F(BackupServiceTest, ACopyLeftByAStoppedBackupIsRemovedAtStart) {
  const std::string left = dir_.Join("smallem.db.backup-12345-0");
  testing::WriteFile(left, "half a copy");
  const std::string other = dir_.Join("other.db.backup-12345-0");  // not this database's
  testing::WriteFile(other, "another database's");
  Restart();
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_TRUE(std::filesystem::exists(other));
}

}  // namespace
}  // namespace smallem
