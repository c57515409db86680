// Job directories and their locks: a running job's directory is never taken
// from its daemon, and one whose daemon died — killed with SIGKILL here, in
// a real process — is moved to failed/ by the next daemon's sweep.
#include "worker/job_dirs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/server/service_test_support.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

TEST(JobDirsTest, ALiveJobStaysAndAFinishedDaemonsJobIsSwept) {
  testing::TempDir dir;
  const std::string cache = dir.Join("cache");
  JobDirs live(cache, 5);
  absl::StatusOr<std::string> running = live.Create(1, 1);
  ASSERT_TRUE(running.ok()) << running.status();
  std::string abandoned;
  {
    JobDirs dead(cache, 5);  // a daemon that goes away with its job running
    absl::StatusOr<std::string> created = dead.Create(2, 1);
    ASSERT_TRUE(created.ok()) << created.status();
    abandoned = *created;
    testing::WriteFile(abandoned + "/spec.json", "{}");
    EXPECT_EQ(JobDirs(cache, 5).SweepAbandoned(), 0) << "both daemons alive";
  }
  EXPECT_EQ(JobDirs(cache, 5).SweepAbandoned(), 1);
  EXPECT_TRUE(fs::exists(*running)) << "a live daemon's job is never swept";
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(cache + "/jobs/failed/run-2-attempt-1/spec.json"));
  live.Remove(*running);
  EXPECT_FALSE(fs::exists(*running));
}

TEST(JobDirsTest, AKilledDaemonsLockIsReleasedByTheKernel) {
  testing::TempDir dir;
  const std::string cache = dir.Join("cache");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the doomed daemon: holds a job until killed
    JobDirs jobs(cache, 5);
    if (!jobs.Create(7, 2).ok()) _exit(1);
    testing::WriteFile(cache + "/jobs/run-7-attempt-2/ready", "");
    pause();
    _exit(0);
  }
  const std::string job = cache + "/jobs/run-7-attempt-2";
  for (int i = 0; i < 200 && !fs::exists(job + "/ready"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(job + "/ready")) << "the child never created its job";
  EXPECT_EQ(JobDirs(cache, 5).SweepAbandoned(), 0) << "its daemon is alive";
  EXPECT_TRUE(fs::exists(job));
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(JobDirs(cache, 5).SweepAbandoned(), 1);
  EXPECT_FALSE(fs::exists(job));
  EXPECT_TRUE(fs::exists(cache + "/jobs/failed/run-7-attempt-2/ready"));
}

TEST(JobDirsTest, AnUnlockedDirectoryGoesOnlyOnceItIsOld) {
  testing::TempDir dir;
  const std::string cache = dir.Join("cache");
  // As a daemon from before the locks, or one killed between mkdir and lock.
  const std::string young = cache + "/jobs/run-3-attempt-1";
  const std::string old = cache + "/jobs/run-4-attempt-1";
  fs::create_directories(young);
  fs::create_directories(old);
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(1));
  EXPECT_EQ(JobDirs(cache, 5).SweepAbandoned(absl::Minutes(10)), 1);
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(cache + "/jobs/failed/run-4-attempt-1"));
  // The cap holds for swept directories too.
  EXPECT_EQ(JobDirs(cache, 0).SweepAbandoned(absl::ZeroDuration()), 1);
  EXPECT_FALSE(fs::exists(young));
  EXPECT_FALSE(fs::exists(cache + "/jobs/failed/run-3-attempt-1"));
}

}  // namespace
}  // namespace smallem
