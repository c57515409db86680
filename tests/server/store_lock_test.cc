// One owner per database file (StoreLock, taken by SqliteStore::Open);
// readers beside it. The two-process case is tests/e2e/store_owner_test.cc.
#include "server/store/store_lock.h"

#include <memory>

#include "gtest/gtest.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::TempDir;

TEST(StoreLockTest, ASecondOwnerIsRefusedNamingTheFileAndReadersAreNot) {
  TempDir dir;
  const std::string path = dir.Join("smallem.db");
  absl::StatusOr<std::unique_ptr<SqliteStore>> owner = SqliteStore::Open(path);
  ASSERT_TRUE(owner.ok()) << owner.status();

  absl::StatusOr<std::unique_ptr<SqliteStore>> second = SqliteStore::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find("the database " + path + " is in use"),
            std::string_view::npos)
      << second.status();

  absl::StatusOr<std::unique_ptr<SqliteStore>> reader = SqliteStore::OpenReadOnly(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  reader->reset();

  // The owner gone, the file has a new one.
  owner->reset();
  absl::StatusOr<std::unique_ptr<SqliteStore>> next = SqliteStore::Open(path);
  EXPECT_TRUE(next.ok()) << next.status();
}

TEST(StoreLockTest, TheOwnersWritesSurviveItsLockBeingReleased) {
  // The lock's descriptor closes after SQLite's connection: closing it
  // first would drop SQLite's own locks while it still wrote.
  TempDir dir;
  const std::string path = dir.Join("smallem.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> owner = SqliteStore::Open(path);
    ASSERT_TRUE(owner.ok()) << owner.status();
    ASSERT_TRUE((*owner)->Submit(testing::MakeSubmission("exp", 2, 1), 1'700'000'000'000).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> again = SqliteStore::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<ExperimentRecord> e = (*again)->FindExperiment("exp");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*again)->ListRuns(e->id)->size(), 2u);
}

}  // namespace
}  // namespace smallem
