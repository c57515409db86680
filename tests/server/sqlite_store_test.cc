#include "server/store/sqlite_store.h"

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "server/store/migrations.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kLater = kNow + 60'000;

RunStatus Requeue(const RunRecord&) { return RunStatus::kQueued; }

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  // Leases the next run to worker "w1" until kLater.
  LeaseRecord LeaseNext() {
    absl::StatusOr<std::optional<LeaseRecord>> lease =
        store_->LeaseNextRun("w1", "cpu", "cpu-2t", kNow, kLater);
    EXPECT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(lease->has_value());
    return **lease;
  }

  TempDir dir_;
  std::string path_ = dir_.Join("smallem.db");
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, NewDatabaseIsAtNewestSchemaVersion) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
  ASSERT_TRUE(db.ok());
  absl::StatusOr<int> version = SchemaVersion(**db);
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, static_cast<int>(EmbeddedMigrations().size()));
}

TEST_F(SqliteStoreTest, DatabaseNewerThanBinaryIsRefused) {
  store_.reset();
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 99"), std::string_view::npos)
      << store.status();
}

TEST_F(SqliteStoreTest, FailedMigrationLeavesSchemaAtPreviousVersion) {
  TempDir other;
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(other.Join("m.db"));
  ASSERT_TRUE(db.ok());
  std::vector<Migration> migrations = {
      {1, "0001_a", "CREATE TABLE a (x INTEGER);"},
      {2, "0002_b", "CREATE TABLE b (x INTEGER); INSERT INTO nowhere VALUES (1);"}};
  absl::Status status = ApplyMigrations(**db, migrations);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("0002_b"), std::string_view::npos) << status;
  EXPECT_EQ(*SchemaVersion(**db), 1);
  // Table b was created inside the failed transaction: rolled back.
  EXPECT_FALSE((*db)->Exec("SELECT * FROM b").ok());
  EXPECT_TRUE((*db)->Exec("SELECT * FROM a").ok());
}

TEST_F(SqliteStoreTest, MigrationNumbersWithGapAreRefused) {
  TempDir other;
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(other.Join("m.db"));
  ASSERT_TRUE(db.ok());
  std::vector<Migration> migrations = {{1, "0001_a", "CREATE TABLE a (x INTEGER);"},
                                       {3, "0003_c", "CREATE TABLE c (x INTEGER);"}};
  EXPECT_EQ(ApplyMigrations(**db, migrations).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, SubmittedRunsSurviveReopen) {
  absl::StatusOr<SubmitOutcome> out = store_->Submit(MakeSubmission("exp", 3, 2), kNow);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->added, 6);
  Reopen();
  absl::StatusOr<ExperimentRecord> exp = store_->FindExperiment("exp");
  ASSERT_TRUE(exp.ok()) << exp.status();
  EXPECT_EQ(exp->baseline, "v0");
  absl::StatusOr<std::vector<RunRecord>> runs = store_->ListRuns(exp->id);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 6u);
  EXPECT_EQ((*runs)[0].variant, "v0");
  EXPECT_EQ((*runs)[0].status, RunStatus::kQueued);
  EXPECT_EQ((*runs)[0].budget_steps, 20);
}

TEST_F(SqliteStoreTest, ResubmissionAddsNothingForFinishedCellsAndReissuesFailedOnes) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 2, 1), kNow).ok());
  LeaseRecord first = LeaseNext();
  ASSERT_TRUE(store_->Complete(first.run.id, first.run.attempt, "w1", "{}", {}, kNow).ok());
  LeaseRecord second = LeaseNext();
  ASSERT_TRUE(store_->Fail(second.run.id, second.run.attempt, "w1",
                           FailureClass::kInvalidConfig, "bad", kNow,
                           [](const RunRecord&) { return RunStatus::kFailed; })
                  .ok());

  absl::StatusOr<SubmitOutcome> again = store_->Submit(MakeSubmission("exp", 3, 1), kLater);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->total, 3);
  EXPECT_EQ(again->unchanged, 1);  // the succeeded one
  EXPECT_EQ(again->reissued, 1);   // the failed one
  EXPECT_EQ(again->added, 1);      // the new variant
  absl::StatusOr<RunRecord> reissued = store_->GetRun(second.run.id);
  EXPECT_EQ(reissued->status, RunStatus::kQueued);
  EXPECT_EQ(reissued->engine_failures, 0);
}

TEST_F(SqliteStoreTest, ResubmissionWithAnotherDatasetIsRefused) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  SubmissionRecord other = MakeSubmission("exp", 1, 1);
  other.dataset_hash = "0ther";
  absl::StatusOr<SubmitOutcome> out = store_->Submit(other, kNow);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, LeaseTakesOldestQueuedRunAndNumbersTheAttempt) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 2, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  EXPECT_EQ(lease.run.id, 1);
  EXPECT_EQ(lease.run.attempt, 1);
  EXPECT_EQ(lease.run.status, RunStatus::kLeased);
  EXPECT_EQ(lease.run.lease_expires_unix_ms, kLater);
  EXPECT_EQ(lease.dataset_hash, "feedbeef");
  EXPECT_EQ(LeaseNext().run.id, 2);
  absl::StatusOr<std::optional<LeaseRecord>> none =
      store_->LeaseNextRun("w1", "cpu", "cpu-2t", kNow, kLater);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(SqliteStoreTest, CompletedResultSurvivesReopen) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  absl::StatusOr<bool> dup = store_->Complete(lease.run.id, 1, "w1",
                                              R"({"val_nats_per_byte":1.5})", {}, kNow);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_FALSE(*dup);
  Reopen();
  absl::StatusOr<std::optional<ResultRecord>> result = store_->GetResult(lease.run.id);
  ASSERT_TRUE(result.ok());
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->result_json, R"({"val_nats_per_byte":1.5})");
  EXPECT_EQ(store_->GetRun(lease.run.id)->status, RunStatus::kSucceeded);
}

// A database of some hundreds of pages: 2 MiB of dataset chunks.
void FillWithChunks(SqliteStore& store) {
  const std::string data(1 << 20, 'd');
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(store
                    .PutDatasetChunk("filler", {.file_name = "train.bin", .file_size = 2 << 20,
                                                .offset = i << 20, .length = 1 << 20},
                                     data, kNow)
                    .ok());
  }
}

TEST_F(SqliteStoreTest, ABackupLetsOtherCallsInBetweenItsStepsAndCopiesTheirWrites) {
  FillWithChunks(*store_);
  const std::string copy = dir_.Join("copy.db");
  int steps = 0;
  bool written_between_steps = false;
  absl::Status backed_up = store_->BackupTo(
      copy, BackupOptions{.pages_per_step = 16, .between_steps = [&](int remaining, int total) {
        ++steps;
        EXPECT_GT(remaining, 0);
        EXPECT_GT(total, 500);
        if (steps == 1) {
          // Another thread's write finishes while the copy is unfinished:
          // the store is not held between steps.
          std::thread other([&] {
            written_between_steps =
                store_->UpsertWorker(WorkerRecord{.id = "written-mid-backup", .hostname = "h",
                                                  .devices_json = "[]"})
                    .ok();
          });
          other.join();
        }
        return absl::OkStatus();
      }});
  ASSERT_TRUE(backed_up.ok()) << backed_up;
  EXPECT_GT(steps, 10);
  EXPECT_TRUE(written_between_steps);
  // Only its owner may read the copy; it holds the write made between steps.
  struct stat st;
  ASSERT_EQ(stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  absl::StatusOr<std::unique_ptr<SqliteStore>> copied = SqliteStore::Open(copy);
  ASSERT_TRUE(copied.ok()) << copied.status();
  absl::StatusOr<std::vector<WorkerRecord>> workers = (*copied)->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].id, "written-mid-backup");
  EXPECT_EQ((*copied)->ListDatasetChunks("filler")->size(), 2u);
}

TEST_F(SqliteStoreTest, ABackupStoppedBetweenStepsLeavesNoFile) {
  FillWithChunks(*store_);
  const std::string copy = dir_.Join("copy.db");
  absl::Status stopped = store_->BackupTo(
      copy, BackupOptions{.pages_per_step = 16, .between_steps = [](int, int) {
        return absl::DeadlineExceededError("out of time");
      }});
  EXPECT_EQ(stopped.code(), absl::StatusCode::kDeadlineExceeded) << stopped;
  EXPECT_FALSE(std::filesystem::exists(copy));
  EXPECT_FALSE(std::filesystem::exists(copy + "-journal"));
  // The store is whole and a later backup succeeds.
  EXPECT_TRUE(store_->BackupTo(copy).ok());
  EXPECT_EQ(store_->BackupTo(copy).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SqliteStoreTest, RepeatedCompletionIsANoOp) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  ASSERT_TRUE(store_->Complete(lease.run.id, 1, "w1", "{\"a\":1}", {}, kNow).ok());
  absl::StatusOr<bool> dup = store_->Complete(lease.run.id, 1, "w1", "{\"a\":1}", {}, kNow);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_TRUE(*dup);
  EXPECT_EQ((*store_->GetResult(lease.run.id))->result_json, "{\"a\":1}");
}

TEST_F(SqliteStoreTest, OnlyTheRecordingWorkerWithTheSameResultGetsDuplicate) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  ASSERT_TRUE(store_->Complete(lease.run.id, 1, "w1", "{\"a\":1}", {}, kNow).ok());
  // Another worker naming the recorded attempt, with its result or another.
  for (const char* result : {"{\"a\":1}", "{\"a\":2}"}) {
    absl::StatusOr<bool> other = store_->Complete(lease.run.id, 1, "w2", result, {}, kNow);
    EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << result;
    EXPECT_NE(other.status().message().find("recorded for worker \"w1\""),
              std::string_view::npos)
        << other.status();
  }
  // The recording worker with a different result.
  absl::StatusOr<bool> changed = store_->Complete(lease.run.id, 1, "w1", "{\"a\":2}", {}, kNow);
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(changed.status().message().find("a different result"), std::string_view::npos)
      << changed.status();
  EXPECT_EQ((*store_->GetResult(lease.run.id))->result_json, "{\"a\":1}");
}

TEST_F(SqliteStoreTest, CompletionFromSupersededAttemptIsRejected) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  LeaseRecord first = LeaseNext();
  ASSERT_TRUE(store_->Fail(first.run.id, 1, "w1", FailureClass::kLeaseLost, "lost", kNow,
                           &Requeue)
                  .ok());
  LeaseRecord second = LeaseNext();
  ASSERT_EQ(second.run.attempt, 2);
  absl::StatusOr<bool> late = store_->Complete(first.run.id, 1, "w1", "{}", {}, kNow);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("superseded"), std::string_view::npos)
      << late.status();
  EXPECT_TRUE(store_->Complete(first.run.id, 2, "w1", "{}", {}, kNow).ok());
}

TEST_F(SqliteStoreTest, HeartbeatRecordsPointsOnceAndUpdatesProgress) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 1, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  std::vector<ProgressRecord> points = {{.step = 10, .total_steps = 20, .loss = 5.0},
                                        {.step = 20, .total_steps = 20, .loss = 4.0}};
  ASSERT_TRUE(store_->Heartbeat(lease.run.id, 1, "w1", points, kNow, kLater + 1).ok());
  // The same heartbeat again, as after a lost reply.
  ASSERT_TRUE(store_->Heartbeat(lease.run.id, 1, "w1", points, kNow, kLater + 2).ok());
  absl::StatusOr<std::vector<MetricPointRecord>> stored =
      store_->ListMetricPoints(lease.run.id, 1, -1);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[1].loss, 4.0);
  absl::StatusOr<RunRecord> run = store_->GetRun(lease.run.id);
  EXPECT_EQ(run->progress.step, 20);
  EXPECT_EQ(run->lease_expires_unix_ms, kLater + 2);
}

TEST_F(SqliteStoreTest, CancelledRunTellsItsWorkerToStopAndRefusesItsResult) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 2, 1), kNow).ok());
  LeaseRecord lease = LeaseNext();
  absl::StatusOr<int> cancelled = store_->Cancel(RunSelector{.experiment_id = 1}, kNow);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, 2);
  absl::StatusOr<HeartbeatOutcome> beat = store_->Heartbeat(lease.run.id, 1, "w1", {}, kNow, kLater);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->cancel);
  EXPECT_EQ(store_->Complete(lease.run.id, 1, "w1", "{}", {}, kNow).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<int> retried = store_->Retry(RunSelector{.run_ids = {lease.run.id}}, kNow);
  EXPECT_EQ(*retried, 1);
  EXPECT_EQ(store_->GetRun(lease.run.id)->status, RunStatus::kQueued);
}

TEST_F(SqliteStoreTest, DatasetChunksRoundTripAndCompleteOnlyWhenMarked) {
  const std::string bytes(3000, 'x');
  const DatasetChunkRef train{.file_name = "train.bin", .file_size = 3000, .offset = 0,
                              .length = 3000};
  ASSERT_TRUE(store_->PutDatasetChunk("abc", train, bytes, kNow).ok());
  EXPECT_FALSE(store_->DatasetBytes("abc")->has_value());
  ASSERT_TRUE(store_->CompleteDataset("abc", {train}, store_->DatasetDrops()).ok());
  Reopen();
  EXPECT_EQ(**store_->DatasetBytes("abc"), 3000);
  absl::StatusOr<std::vector<DatasetChunkRef>> chunks = store_->ListDatasetChunks("abc");
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_EQ((*chunks)[0].length, 3000);
  EXPECT_EQ(*store_->ReadDatasetChunk("abc", "train.bin", 0), bytes);
  EXPECT_EQ(store_->PutDatasetChunk("abc", {.file_name = "x"}, "y", kNow).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, AStoredChunkIsNeverReplaced) {
  const DatasetChunkRef tokenizer{.file_name = "tokenizer.json", .file_size = 4, .offset = 0,
                                  .length = 4};
  ASSERT_TRUE(store_->PutDatasetChunk("abc", tokenizer, "good", kNow).ok());
  EXPECT_TRUE(store_->PutDatasetChunk("abc", tokenizer, "good", kNow).ok());  // same bytes
  absl::Status swapped = store_->PutDatasetChunk("abc", tokenizer, "evil", kNow);
  EXPECT_EQ(swapped.code(), absl::StatusCode::kFailedPrecondition) << swapped;
  EXPECT_NE(swapped.message().find("never replaced"), std::string::npos) << swapped;
  EXPECT_EQ(*store_->ReadDatasetChunk("abc", "tokenizer.json", 0), "good");
}

TEST_F(SqliteStoreTest, ADatasetWhoseChunksChangedSinceTheyWereVerifiedIsNotCompleted) {
  const DatasetChunkRef first{.file_name = "train.bin", .file_size = 8, .offset = 0, .length = 4};
  ASSERT_TRUE(store_->PutDatasetChunk("abc", first, "0123", kNow).ok());
  const int64_t drops = store_->DatasetDrops();
  const std::vector<DatasetChunkRef> verified = *store_->ListDatasetChunks("abc");
  // Another upload adds a chunk after the first one's check.
  ASSERT_TRUE(store_->PutDatasetChunk("abc", {.file_name = "train.bin", .file_size = 8,
                                              .offset = 2, .length = 4},
                                      "xxxx", kNow)
                  .ok());
  absl::Status completed = store_->CompleteDataset("abc", verified, drops);
  EXPECT_EQ(completed.code(), absl::StatusCode::kAborted) << completed;
  EXPECT_FALSE(store_->DatasetBytes("abc")->has_value());
}

TEST_F(SqliteStoreTest, ADatasetDroppedAndSentAgainSinceItWasVerifiedIsNotCompleted) {
  const DatasetChunkRef tokenizer{.file_name = "tokenizer.json", .file_size = 4, .offset = 0,
                                  .length = 4};
  ASSERT_TRUE(store_->PutDatasetChunk("abc", tokenizer, "good", kNow).ok());
  const int64_t drops = store_->DatasetDrops();
  const std::vector<DatasetChunkRef> verified = *store_->ListDatasetChunks("abc");
  // Between the check and the completion, another client has the upload
  // dropped and sends other bytes of the same size: the same chunk list.
  ASSERT_TRUE(store_->DeleteIncompleteDataset("abc").ok());
  ASSERT_TRUE(store_->PutDatasetChunk("abc", tokenizer, "evil", kNow).ok());
  ASSERT_EQ(store_->ListDatasetChunks("abc")->size(), verified.size());
  absl::Status completed = store_->CompleteDataset("abc", verified, drops);
  EXPECT_EQ(completed.code(), absl::StatusCode::kAborted) << completed;
  EXPECT_FALSE(store_->DatasetBytes("abc")->has_value());
}

TEST_F(SqliteStoreTest, IncompleteDatasetsAreDroppedAndCompleteOnesKept) {
  const DatasetChunkRef chunk{.file_name = "val.bin", .file_size = 2, .offset = 0, .length = 2};
  ASSERT_TRUE(store_->PutDatasetChunk("done", chunk, "ab", kNow).ok());
  ASSERT_TRUE(store_->CompleteDataset("done", {chunk}, store_->DatasetDrops()).ok());
  ASSERT_TRUE(store_->PutDatasetChunk("partial", chunk, "ab", kNow).ok());
  absl::StatusOr<int> dropped = store_->DeleteIncompleteDatasets();
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 1);
  EXPECT_TRUE(store_->ListDatasetChunks("partial")->empty());
  EXPECT_EQ(**store_->DatasetBytes("done"), 2);
}

TEST_F(SqliteStoreTest, ConcurrentWritesCommitTogetherAndAFailedOneUndoesOnlyItself) {
  ASSERT_TRUE(store_->Submit(MakeSubmission("exp", 20, 1), kNow).ok());
  for (int i = 0; i < 20; ++i) LeaseNext();
  std::vector<absl::Status> statuses(40);
  std::vector<std::thread> threads;
  for (int i = 0; i < 40; ++i) {
    threads.emplace_back([&, i] {
      // Even threads complete run i/2+1 properly; odd ones with a wrong
      // attempt, which must be refused without undoing their batch-mates.
      const int64_t run = i / 2 + 1;
      statuses[i] = store_->Complete(run, i % 2 == 0 ? 1 : 7, "w1", "{}", {{.step = 1}}, kNow)
                        .status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0) EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    else EXPECT_EQ(statuses[i].code(), absl::StatusCode::kFailedPrecondition) << i;
  }
  Reopen();
  EXPECT_EQ(store_->ListResults(1)->size(), 20u);
  EXPECT_EQ(store_->CountRuns(1)->succeeded, 20);
}

TEST_F(SqliteStoreTest, WorkerRegistrationIsUpsertedAndSurvivesReopen) {
  ASSERT_TRUE(store_->UpsertWorker({.id = "w1", .hostname = "h", .devices_json = "[]",
                                    .registered_unix_ms = kNow, .last_seen_unix_ms = kNow})
                  .ok());
  ASSERT_TRUE(store_->UpsertWorker({.id = "w1", .hostname = "h2", .devices_json = "[]",
                                    .registered_unix_ms = kLater, .last_seen_unix_ms = kLater})
                  .ok());
  Reopen();
  absl::StatusOr<std::vector<WorkerRecord>> workers = store_->ListWorkers();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].hostname, "h2");
  EXPECT_EQ((*workers)[0].registered_unix_ms, kNow);
  EXPECT_EQ((*workers)[0].last_seen_unix_ms, kLater);
}

}  // namespace
}  // namespace smallem
