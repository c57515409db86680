#include "server/queue/job_queue.h"

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

class JobQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("q.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    options_.lease_duration_ms = 10'000;
    options_.max_lease_losses = 2;
    queue_ = std::make_unique<JobQueue>(store_.get(), &clock_, options_);
  }
  void Submit(int variants, int seeds, int retry_budget = 2) {
    SubmissionRecord s = MakeSubmission("exp", variants, seeds);
    s.retry_budget = retry_budget;
    ASSERT_TRUE(store_->Submit(s, clock_.NowUnixMs()).ok());
  }
  Lease MustLease(const std::string& worker = "w1") {
    absl::StatusOr<std::optional<Lease>> lease = queue_->LeaseRun(worker, "cpu", "cpu-2t");
    EXPECT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(lease->has_value()) << "nothing to lease";
    return lease->value_or(Lease{});
  }
  RunRecord Run(int64_t id) { return *store_->GetRun(id); }

  TempDir dir_;
  ManualClock clock_;
  JobQueueOptions options_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobQueue> queue_;
};

TEST_F(JobQueueTest, LeasedSpecCarriesDatasetSeedAndBudget) {
  Submit(1, 1);
  Lease lease = MustLease();
  nlohmann::json spec = nlohmann::json::parse(lease.spec_json);
  EXPECT_EQ(spec["data"], "feedbeef");
  EXPECT_EQ(spec["seed"], 1);
  EXPECT_EQ(spec["steps"], 20);
  EXPECT_EQ(spec["layers"], 1);
  EXPECT_EQ(lease.expires_unix_ms, clock_.NowUnixMs() + 10'000);
}

TEST_F(JobQueueTest, ExpiredLeaseIsRequeued) {
  Submit(1, 1);
  Lease lease = MustLease();
  clock_.AdvanceMs(9'000);
  EXPECT_EQ(*queue_->ReapExpiredLeases(), 0);  // not yet expired
  clock_.AdvanceMs(2'000);
  EXPECT_EQ(*queue_->ReapExpiredLeases(), 1);
  RunRecord run = Run(lease.run_id);
  EXPECT_EQ(run.status, RunStatus::kQueued);
  EXPECT_EQ(run.lease_losses, 1);
  EXPECT_EQ(run.engine_failures, 0);
  EXPECT_EQ(run.last_failure, FailureClass::kLeaseLost);
  Lease again = MustLease("w2");
  EXPECT_EQ(again.run_id, lease.run_id);
  EXPECT_EQ(again.attempt, 2);
}

TEST_F(JobQueueTest, HeartbeatKeepsTheLeaseAlive) {
  Submit(1, 1);
  Lease lease = MustLease();
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(8'000);
    absl::StatusOr<HeartbeatOutcome> beat = queue_->Heartbeat(lease.run_id, lease.attempt, "w1", {});
    ASSERT_TRUE(beat.ok()) << beat.status();
    EXPECT_EQ(beat->lease_expires_unix_ms, clock_.NowUnixMs() + 10'000);
    EXPECT_EQ(*queue_->ReapExpiredLeases(), 0);
  }
}

TEST_F(JobQueueTest, CompletionFromExpiredAttemptIsRejected) {
  Submit(1, 1);
  Lease lease = MustLease();
  clock_.AdvanceMs(10'001);
  // Expired but not yet reaped: rejected all the same.
  absl::StatusOr<bool> late = queue_->Complete(lease.run_id, lease.attempt, "w1", "{}", {});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_EQ(*queue_->ReapExpiredLeases(), 1);
  late = queue_->Complete(lease.run_id, lease.attempt, "w1", "{}", {});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  // The next attempt completes and is the one recorded.
  Lease again = MustLease("w2");
  ASSERT_TRUE(queue_->Complete(again.run_id, again.attempt, "w2", "{\"ok\":1}", {}).ok());
  late = queue_->Complete(lease.run_id, lease.attempt, "w1", "{}", {});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::optional<ResultRecord>> result = store_->GetResult(lease.run_id);
  EXPECT_EQ((*result)->attempt, again.attempt);
}

TEST_F(JobQueueTest, HeartbeatFromExpiredAttemptIsRejected) {
  Submit(1, 1);
  Lease lease = MustLease();
  clock_.AdvanceMs(10'001);
  EXPECT_EQ(queue_->Heartbeat(lease.run_id, lease.attempt, "w1", {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobQueueTest, WritesWakeAWaitingReaderAndRefusedOnesDoNot) {
  Submit(1, 1);
  const uint64_t before = queue_->changes();
  EXPECT_FALSE(queue_->WaitForChange(before, absl::Milliseconds(10)));  // nothing happened
  Lease lease = MustLease();
  EXPECT_TRUE(queue_->WaitForChange(before, absl::ZeroDuration()));
  uint64_t seen = queue_->changes();
  std::thread worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(queue_->Heartbeat(lease.run_id, lease.attempt, "w1", {}).ok());
  });
  EXPECT_TRUE(queue_->WaitForChange(seen, absl::Seconds(30)));  // woken by the heartbeat
  worker.join();
  seen = queue_->changes();
  EXPECT_FALSE(queue_->Heartbeat(lease.run_id, lease.attempt + 1, "w1", {}).ok());
  EXPECT_EQ(queue_->changes(), seen);  // a refused write changes nothing
}

TEST_F(JobQueueTest, DuplicateCompletionIsIdempotent) {
  Submit(1, 1);
  Lease lease = MustLease();
  EXPECT_FALSE(*queue_->Complete(lease.run_id, lease.attempt, "w1", "{}", {}));
  clock_.AdvanceMs(60'000);  // even after the lease would have expired
  absl::StatusOr<bool> dup = queue_->Complete(lease.run_id, lease.attempt, "w1", "{}", {});
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_TRUE(*dup);
  EXPECT_EQ(store_->ListAttempts(lease.run_id)->size(), 1u);
}

TEST_F(JobQueueTest, EngineErrorIsRetriedUntilTheBudgetIsSpent) {
  Submit(1, 1, /*retry_budget=*/2);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Lease lease = MustLease();
    ASSERT_EQ(lease.attempt, attempt);
    absl::StatusOr<bool> retry = queue_->Fail(lease.run_id, lease.attempt, "w1",
                                              FailureClass::kEngineError, "segfault");
    ASSERT_TRUE(retry.ok()) << retry.status();
    EXPECT_EQ(*retry, attempt < 3) << "attempt " << attempt;
  }
  RunRecord run = Run(1);
  EXPECT_EQ(run.status, RunStatus::kFailed);
  EXPECT_EQ(run.engine_failures, 3);
  EXPECT_EQ(run.last_error, "segfault");
}

TEST_F(JobQueueTest, InvalidConfigIsNotRetried) {
  Submit(1, 1);
  Lease lease = MustLease();
  absl::StatusOr<bool> retry = queue_->Fail(lease.run_id, lease.attempt, "w1",
                                            FailureClass::kInvalidConfig, "heads must divide embed");
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(*retry);
  EXPECT_EQ(Run(lease.run_id).status, RunStatus::kFailed);
  absl::StatusOr<std::optional<Lease>> none = queue_->LeaseRun("w1", "cpu", "cpu-2t");
  EXPECT_FALSE(none->has_value());
}

TEST_F(JobQueueTest, LostLeasesAreNotChargedToTheRetryBudget) {
  Submit(1, 1, /*retry_budget=*/0);
  // Two lost leases (the allowance) then a success: the budget of 0 engine
  // retries is untouched.
  for (int i = 0; i < 2; ++i) {
    MustLease();
    clock_.AdvanceMs(10'001);
    ASSERT_EQ(*queue_->ReapExpiredLeases(), 1);
  }
  RunRecord run = Run(1);
  EXPECT_EQ(run.status, RunStatus::kQueued);
  EXPECT_EQ(run.engine_failures, 0);
  EXPECT_EQ(run.lease_losses, 2);
  // A third loss exceeds max_lease_losses = 2.
  MustLease();
  clock_.AdvanceMs(10'001);
  ASSERT_EQ(*queue_->ReapExpiredLeases(), 1);
  EXPECT_EQ(Run(1).status, RunStatus::kFailed);
}

TEST_F(JobQueueTest, ReleasedRunIsRequeuedAtOnceAndChargedToNothing) {
  Submit(1, 1, /*retry_budget=*/0);
  // More releases than any budget allows: none of them counts.
  for (int attempt = 1; attempt <= 5; ++attempt) {
    Lease lease = MustLease("w" + std::to_string(attempt));
    ASSERT_EQ(lease.attempt, attempt);
    ASSERT_TRUE(queue_->Release(lease.run_id, lease.attempt, "w" + std::to_string(attempt),
                                "slurm job 7 was signalled")
                    .ok());
    RunRecord run = Run(lease.run_id);
    EXPECT_EQ(run.status, RunStatus::kQueued);  // no reaper, no clock move: at once
    EXPECT_EQ(run.lease_losses, 0);
    EXPECT_EQ(run.engine_failures, 0);
    EXPECT_EQ(run.last_failure, FailureClass::kNone);
  }
  std::vector<AttemptRecord> attempts = *store_->ListAttempts(1);
  ASSERT_EQ(attempts.size(), 5u);
  EXPECT_EQ(attempts[0].outcome, kReleasedOutcome);
  EXPECT_EQ(attempts[0].message, "slurm job 7 was signalled");
  EXPECT_GT(attempts[0].ended_unix_ms, 0);
}

TEST_F(JobQueueTest, RepeatedReleaseIsANoOpAndAStaleOneIsRefused) {
  Submit(1, 1);
  Lease first = MustLease("w1");
  ASSERT_TRUE(queue_->Release(first.run_id, first.attempt, "w1", "stopping").ok());
  Lease second = MustLease("w2");
  // The first worker's reply was lost; its repeat changes nothing, even
  // though the run now belongs to attempt 2.
  EXPECT_TRUE(queue_->Release(first.run_id, first.attempt, "w1", "stopping").ok());
  RunRecord run = Run(first.run_id);
  EXPECT_EQ(run.status, RunStatus::kLeased);
  EXPECT_EQ(run.attempt, 2);
  EXPECT_EQ(run.lease_worker, "w2");
  // A release the run's lease does not back: refused.
  EXPECT_EQ(queue_->Release(first.run_id, second.attempt, "w1", "x").code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(queue_->Complete(second.run_id, second.attempt, "w2",
                               R"({"val_nats_per_byte":1})", {}).ok());
  EXPECT_EQ(queue_->Release(second.run_id, second.attempt, "w2", "late").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Run(first.run_id).status, RunStatus::kSucceeded);
  EXPECT_EQ(queue_->Release(99, 1, "w1", "x").code(), absl::StatusCode::kNotFound);
}

TEST_F(JobQueueTest, RepeatedFailureReportIsANoOp) {
  Submit(1, 1);
  Lease lease = MustLease();
  ASSERT_TRUE(queue_->Fail(lease.run_id, 1, "w1", FailureClass::kEngineError, "x").ok());
  absl::StatusOr<bool> again = queue_->Fail(lease.run_id, 1, "w1", FailureClass::kEngineError, "x");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Run(lease.run_id).engine_failures, 1);
}

TEST_F(JobQueueTest, RetryRequeuesFailedRunWithFreshBudget) {
  Submit(1, 1, /*retry_budget=*/0);
  Lease lease = MustLease();
  ASSERT_FALSE(*queue_->Fail(lease.run_id, 1, "w1", FailureClass::kEngineError, "x"));
  EXPECT_EQ(*queue_->Retry(RunSelector{.experiment_id = 1}), 1);
  RunRecord run = Run(lease.run_id);
  EXPECT_EQ(run.status, RunStatus::kQueued);
  EXPECT_EQ(run.engine_failures, 0);
  EXPECT_EQ(MustLease().attempt, 2);
}

TEST_F(JobQueueTest, CancelStopsLeasedRunAtItsNextHeartbeat) {
  Submit(1, 1);
  Lease lease = MustLease();
  EXPECT_EQ(*queue_->Cancel(RunSelector{.run_ids = {lease.run_id}}), 1);
  absl::StatusOr<HeartbeatOutcome> beat = queue_->Heartbeat(lease.run_id, 1, "w1", {});
  ASSERT_TRUE(beat.ok());
  EXPECT_TRUE(beat->cancel);
  EXPECT_EQ(Run(lease.run_id).status, RunStatus::kCancelled);
}

TEST_F(JobQueueTest, ReaperThreadRequeuesExpiredLease) {
  queue_.reset();
  options_.reap_interval_ms = 5;
  queue_ = std::make_unique<JobQueue>(store_.get(), &clock_, options_);
  Submit(1, 1);
  MustLease();
  queue_->StartReaper();
  clock_.AdvanceMs(10'001);
  for (int i = 0; i < 400 && Run(1).status != RunStatus::kQueued; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(Run(1).status, RunStatus::kQueued);
  queue_->StopReaper();
}

TEST_F(JobQueueTest, ConcurrentWorkersNeverShareARun) {
  Submit(10, 4);
  absl::Mutex mu;
  std::set<int64_t> seen;
  int duplicates = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&, w] {
      const std::string id = "w" + std::to_string(w);
      while (true) {
        absl::StatusOr<std::optional<Lease>> lease = queue_->LeaseRun(id, "cpu", "cpu");
        if (!lease.ok() || !lease->has_value()) return;
        {
          absl::MutexLock lock(&mu);
          if (!seen.insert((*lease)->run_id).second) ++duplicates;
        }
        EXPECT_TRUE(queue_->Complete((*lease)->run_id, (*lease)->attempt, id, "{}", {}).ok());
      }
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(store_->CountRuns(1)->succeeded, 40);
}

}  // namespace
}  // namespace smallem
