// DatasetCache against a real Coordinator serving an uploaded dataset: a
// fetch lands complete under its hash, and workers sharing one cache
// directory (each with its own DatasetCache, as separate daemons have) may
// fetch the same dataset at once without failing or leaving debris.
#include "worker/dataset_cache.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/coordinator_fixture.h"

namespace smallem {
namespace {

class DatasetCacheTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    // A dataset large enough (1 MB) that concurrent fetches overlap.
    data_dir_ = dir_.Join("big");
    hash_ = testing::WriteFakeDataset(data_dir_, 1 << 20);
    Start();
    ASSERT_TRUE(testing::UploadDirectory(*client_, data_dir_, hash_, 64 << 10).ok());
  }

  // Names under CACHE/datasets.
  std::vector<std::string> CachedNames(const std::string& cache) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(cache + "/datasets")) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }
};

TEST_F(DatasetCacheTest, FetchesOnceAndServesTheCompleteDirectory) {
  const std::string cache = dir_.Join("cache");
  DatasetCache datasets(cache);
  CoordinatorClient client(coordinator_->address());
  absl::StatusOr<std::string> dir = datasets.Ensure(hash_, client);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, datasets.DirFor(hash_));
  EXPECT_TRUE(VerifyDatasetDir(*dir, hash_).ok());
  EXPECT_EQ(testing::ReadFile(*dir + "/train.bin"), testing::ReadFile(data_dir_ + "/train.bin"));
  EXPECT_EQ(CachedNames(cache), std::vector<std::string>{hash_});
}

TEST_F(DatasetCacheTest, WorkersSharingACacheFetchTheSameDatasetAtOnce) {
  constexpr int kWorkers = 4;
  for (int round = 0; round < 3; ++round) {
    const std::string cache = dir_.Join(absl::StrCat("shared", round));
    std::vector<absl::StatusOr<std::string>> dirs(kWorkers, std::string());
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        DatasetCache datasets(cache);
        CoordinatorClient client(coordinator_->address());
        dirs[w] = datasets.Ensure(hash_, client);
      });
    }
    for (std::thread& t : workers) t.join();
    for (int w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(dirs[w].ok()) << "round " << round << ", worker " << w << ": "
                                << dirs[w].status();
      EXPECT_EQ(*dirs[w], DatasetCache(cache).DirFor(hash_));
    }
    EXPECT_TRUE(VerifyDatasetDir(*dirs[0], hash_).ok());
    // Only the dataset: no partial directory left behind by a loser.
    EXPECT_EQ(CachedNames(cache), std::vector<std::string>{hash_}) << "round " << round;
  }
}

TEST_F(DatasetCacheTest, AFetchSweepsPartialDirectoriesLeftByCrashesButNotLiveOnes) {
  const std::string cache = dir_.Join("swept");
  DatasetCache datasets(cache);
  const std::string stale = datasets.DirFor(hash_) + ".partial-crashd";
  const std::string live = datasets.DirFor(hash_) + ".partial-livexx";
  std::filesystem::create_directories(stale);
  std::filesystem::create_directories(live);
  testing::WriteFile(stale + "/train.bin", "torn");
  // A daemon that crashed two hours ago; a fetch still under its deadline.
  std::filesystem::last_write_time(
      stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  CoordinatorClient client(coordinator_->address());
  ASSERT_TRUE(datasets.Ensure(hash_, client).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
}

}  // namespace
}  // namespace smallem
