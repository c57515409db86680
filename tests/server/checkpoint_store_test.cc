// Checkpoints on the coordinator: an upload checked by its SHA-256 replaces
// the run's previous checkpoint; only the attempt holding the lease writes
// one; a requeued run is leased with it only to its device class; the
// checkpoint goes when the result is recorded (and the reaper sweeps what
// ended otherwise). A real SQLite file, the real queue.
#include "server/service/checkpoint_upload.h"

#include <functional>

#include "base/sha256.h"
#include "gtest/gtest.h"
#include "server/queue/job_queue.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr char kClass[] = "cpu-1t-test";

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("c.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    options_.lease_duration_ms = 10'000;
    queue_ = std::make_unique<JobQueue>(store_.get(), &clock_, options_);
    ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), clock_.NowUnixMs()).ok());
  }

  Lease MustLease(const std::string& worker, const std::string& device_class = kClass) {
    absl::StatusOr<std::optional<Lease>> lease = queue_->LeaseRun(worker, "cpu", device_class);
    EXPECT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(lease->has_value()) << "nothing to lease";
    return lease->value_or(Lease{});
  }

  // Uploads `bytes` as a checkpoint at `step` of (lease, worker) in chunks
  // of `chunk` bytes.
  absl::StatusOr<int64_t> Upload(const Lease& lease, const std::string& worker,
                                 const std::string& bytes, int64_t step, size_t chunk = 5,
                                 std::string sha256 = "") {
    if (sha256.empty()) sha256 = Sha256Hex(bytes);
    CheckpointUpload upload(store_.get(), &clock_);
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      absl::Status added = upload.Add(CheckpointPiece{
          .worker_id = worker, .run_id = lease.run_id, .attempt = lease.attempt, .step = step,
          .sha256 = sha256, .file_size = static_cast<int64_t>(bytes.size()),
          .offset = static_cast<int64_t>(at), .data = std::string_view(bytes).substr(at, chunk)});
      if (!added.ok()) {
        upload.Abandon();
        return added;
      }
    }
    return upload.Finish();
  }

  std::string Stored(int64_t run_id) {
    absl::StatusOr<std::optional<CheckpointRecord>> c = store_->GetCheckpoint(run_id);
    if (!c.ok() || !*c) return "";
    std::string out;
    const auto chunks = store_->ListCheckpointChunks(run_id, (*c)->sha256);
    for (const auto& [offset, length] : *chunks) {
      out += *store_->ReadCheckpointChunk(run_id, (*c)->sha256, offset);
    }
    return out;
  }

  TempDir dir_;
  ManualClock clock_;
  JobQueueOptions options_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobQueue> queue_;
};

TEST_F(CheckpointStoreTest, NewerCheckpointReplacesTheLastAndUsageCountsOnlyIt) {
  const Lease lease = MustLease("w1");
  ASSERT_TRUE(Upload(lease, "w1", "first checkpoint bytes", 10).ok());
  EXPECT_EQ(Stored(lease.run_id), "first checkpoint bytes");
  absl::StatusOr<int64_t> stored = Upload(lease, "w1", "second, longer checkpoint bytes", 20);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 31);
  EXPECT_EQ(Stored(lease.run_id), "second, longer checkpoint bytes");
  std::optional<CheckpointRecord> c = *store_->GetCheckpoint(lease.run_id);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 20);
  EXPECT_EQ(c->device_class, kClass);
  EXPECT_EQ(c->attempt, lease.attempt);
  const CheckpointUsage usage = *store_->GetCheckpointUsage();
  EXPECT_EQ(usage.count, 1);
  EXPECT_EQ(usage.bytes, 31);
  // The same upload again (its reply was lost) changes nothing.
  EXPECT_EQ(*Upload(lease, "w1", "second, longer checkpoint bytes", 20), 31);
  EXPECT_EQ(store_->GetCheckpointUsage()->count, 1);
}

TEST_F(CheckpointStoreTest, BytesThatDoNotHashToTheClaimIsDataLossAndKeepThePrevious) {
  const Lease lease = MustLease("w1");
  ASSERT_TRUE(Upload(lease, "w1", "good checkpoint", 10).ok());
  absl::StatusOr<int64_t> bad =
      Upload(lease, "w1", "tampered bytes!", 20, 5, Sha256Hex("something else entirely"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_EQ(Stored(lease.run_id), "good checkpoint");
  EXPECT_EQ(store_->GetCheckpointUsage()->count, 1);  // the bad upload left nothing
}

TEST_F(CheckpointStoreTest, OnlyTheAttemptHoldingTheLeaseUploads) {
  const Lease lease = MustLease("w1");
  EXPECT_EQ(Upload(lease, "w2", "from another worker", 5).status().code(),
            absl::StatusCode::kFailedPrecondition);
  clock_.AdvanceMs(10'001);  // the lease expires
  ASSERT_EQ(*queue_->ReapExpiredLeases(), 1);
  EXPECT_EQ(Upload(lease, "w1", "from the expired attempt", 5).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetCheckpointUsage()->count, 0);
}

TEST_F(CheckpointStoreTest, ARefusedUploadLeavesTheLeaseholdersUploadInFlightAlone) {
  const Lease lease = MustLease("w1");
  const std::string bytes = "the leaseholder's checkpoint";
  const std::string sha = Sha256Hex(bytes);
  auto piece = [&](const std::string& worker, int64_t at, size_t length) {
    return CheckpointPiece{.worker_id = worker, .run_id = lease.run_id,
                           .attempt = lease.attempt, .step = 7, .sha256 = sha,
                           .file_size = static_cast<int64_t>(bytes.size()), .offset = at,
                           .data = std::string_view(bytes).substr(at, length)};
  };
  CheckpointUpload holder(store_.get(), &clock_);
  ASSERT_TRUE(holder.Add(piece("w1", 0, 10)).ok());
  {
    // Another worker names the same run, attempt and SHA-256.
    CheckpointUpload intruder(store_.get(), &clock_);
    const absl::Status refused = intruder.Add(piece("w2", 0, 10));
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    intruder.Abandon();  // as the service does after a refused chunk
  }
  ASSERT_TRUE(holder.Add(piece("w1", 10, bytes.size() - 10)).ok());
  absl::StatusOr<int64_t> stored = holder.Finish();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(Stored(lease.run_id), bytes);
}

TEST_F(CheckpointStoreTest, MalformedChunksAreInvalidArgument) {
  const Lease lease = MustLease("w1");
  CheckpointPiece piece{.worker_id = "w1", .run_id = lease.run_id, .attempt = lease.attempt,
                        .step = 1, .sha256 = Sha256Hex("abc"), .file_size = 3, .offset = 0,
                        .data = "abc"};
  for (auto change : std::vector<std::function<void(CheckpointPiece&)>>{
           [](CheckpointPiece& p) { p.sha256 = "ABC"; },
           [](CheckpointPiece& p) { p.file_size = -1; },
           [](CheckpointPiece& p) { p.step = -5; },
           [](CheckpointPiece& p) { p.offset = 2; },
           [](CheckpointPiece& p) { p.attempt = 0; }}) {
    CheckpointPiece bad = piece;
    change(bad);
    CheckpointUpload upload(store_.get(), &clock_);
    EXPECT_EQ(upload.Add(bad).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(CheckpointStoreTest, RequeuedRunIsLeasedWithItsCheckpointOnlyToItsDeviceClass) {
  const Lease first = MustLease("w1");
  ASSERT_TRUE(Upload(first, "w1", "state at step 40", 40).ok());
  clock_.AdvanceMs(10'001);
  ASSERT_EQ(*queue_->ReapExpiredLeases(), 1);  // the worker died

  absl::StatusOr<std::optional<Lease>> other = queue_->LeaseRun("gpu", "cuda:0", "h100");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value()) << "a run with a checkpoint went to another device class";
  const Lease second = MustLease("w2");
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_EQ(second.attempt, first.attempt + 1);
  ASSERT_TRUE(second.checkpoint.has_value());
  EXPECT_EQ(second.checkpoint->step, 40);
  EXPECT_EQ(second.checkpoint->sha256, Sha256Hex("state at step 40"));
  EXPECT_EQ(second.checkpoint->total_bytes, 16);
}

TEST_F(CheckpointStoreTest, RecordedResultDeletesTheCheckpoint) {
  const Lease lease = MustLease("w1");
  ASSERT_TRUE(Upload(lease, "w1", "state", 3).ok());
  ASSERT_TRUE(queue_->Complete(lease.run_id, lease.attempt, "w1",
                               R"({"val_nats_per_byte":1.5})", {}).ok());
  EXPECT_FALSE(store_->GetCheckpoint(lease.run_id)->has_value());
  EXPECT_EQ(store_->GetCheckpointUsage()->count, 0);
  EXPECT_EQ(store_->GetCheckpointUsage()->bytes, 0);
}

TEST_F(CheckpointStoreTest, CheckpointsOfEndedRunsAreSweptAndSurviveReopenUntilThen) {
  const Lease lease = MustLease("w1");
  ASSERT_TRUE(Upload(lease, "w1", "state", 3).ok());
  EXPECT_EQ(*store_->DeleteFinishedRunsCheckpoints(), 0);  // the run is still leased
  queue_.reset();
  store_.reset();
  store_ = *SqliteStore::Open(dir_.Join("c.db"));
  queue_ = std::make_unique<JobQueue>(store_.get(), &clock_, options_);
  EXPECT_EQ(Stored(lease.run_id), "state");
  ASSERT_EQ(*queue_->Cancel(RunSelector{.run_ids = {lease.run_id}}), 1);
  EXPECT_EQ(*store_->DeleteFinishedRunsCheckpoints(), 1);
  EXPECT_EQ(store_->GetCheckpointUsage()->count, 0);
}

}  // namespace
}  // namespace smallem
