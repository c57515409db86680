// The chaos test, bounded (bench/chaos.h, docs/reliability.md): a real
// coordinator and three real worker daemons run six tiny checkpointed runs
// while six SIGKILLs hit them (workers and the coordinator, each restarted
// at once). Every run ends with exactly one result, the database is
// intact, and a killed-and-resumed run equals a clean run of its cell.
#include "bench/chaos.h"

#include "gtest/gtest.h"
#include "tests/server/test_support.h"
#include "tests/worker/worker_test_support.h"

namespace smallem {
namespace {

TEST(ChaosTest, KilledWorkersAndCoordinatorLoseNoRunAndResumeBitForBit) {
  if (testing::BuildDir().empty()) GTEST_SKIP() << "SMALLEM_BUILD_DIR is not set (run via ctest)";
  testing::TempDir dir;
  ChaosOptions o;
  o.bin_dir = testing::BuildDir();
  o.work_dir = dir.path();
  o.workers = 3;
  o.variants = 3;
  o.seeds = 2;
  // Long enough that the first kill finds every worker mid-run: ~5–10 s a
  // run here (2026-12-02; 1500 steps became too few once attention ran on
  // register tiles, and every run ended before the first kill).
  o.steps = 6000;
  o.kills = 6;
  o.min_gap_s = 0.5;
  o.max_gap_s = 1.5;
  o.coordinator_share = 0.34;
  o.seed = 7;
  absl::StatusOr<ChaosReport> r = RunChaos(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->runs, 6);
  EXPECT_EQ(r->results, 6);    // none lost; the schema allows no second result
  EXPECT_EQ(r->succeeded, 6);
  EXPECT_TRUE(r->integrity_ok);
  EXPECT_EQ(r->worker_kills + r->coordinator_kills, 6);
  // The first kill waits for every worker's run to hold a checkpoint.
  EXPECT_GE(r->resumed_runs, 1);
  EXPECT_TRUE(r->compared_equal) << "run " << r->compared_run
                                 << " resumed from a checkpoint differs from a clean run";
}

}  // namespace
}  // namespace smallem
