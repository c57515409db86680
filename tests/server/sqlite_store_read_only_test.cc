// SqliteStore::OpenReadOnly: a reader beside the coordinator that owns the
// file (or with none) — `smallemctl report --db FILE`.
#include <filesystem>
#include <memory>

#include "gtest/gtest.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_store.h"
#include "tests/server/test_support.h"

namespace smallem {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr int64_t kNow = 1'700'000'000'000;

TEST(SqliteStoreReadOnlyTest, ReadsWhatTheOwnerCommitsAndRefusesWrites) {
  TempDir dir;
  const std::string path = dir.Join("smallem.db");
  absl::StatusOr<std::unique_ptr<SqliteStore>> owner = SqliteStore::Open(path);
  ASSERT_TRUE(owner.ok()) << owner.status();
  ASSERT_TRUE((*owner)->Submit(MakeSubmission("first", 2, 1), kNow).ok());

  absl::StatusOr<std::unique_ptr<SqliteStore>> reader = SqliteStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<ExperimentRecord> first = (*reader)->FindExperiment("first");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*reader)->ListRuns(first->id)->size(), 2u);

  // The owner goes on writing; the reader sees each commit.
  ASSERT_TRUE((*owner)->Submit(MakeSubmission("second", 1, 3), kNow).ok());
  absl::StatusOr<ExperimentRecord> second = (*reader)->FindExperiment("second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*reader)->ListRuns(second->id)->size(), 3u);

  absl::StatusOr<SubmitOutcome> written = (*reader)->Submit(MakeSubmission("third", 1, 1), kNow);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kPermissionDenied) << written.status();
  EXPECT_EQ((*owner)->FindExperiment("third").status().code(), absl::StatusCode::kNotFound);
}

TEST(SqliteStoreReadOnlyTest, AMissingFileIsNotFoundAndNotCreated) {
  TempDir dir;
  const std::string path = dir.Join("absent.db");
  absl::StatusOr<std::unique_ptr<SqliteStore>> reader = SqliteStore::OpenReadOnly(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound) << reader.status();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SqliteStoreReadOnlyTest, AnOlderSchemaIsNotMigratedByAReader) {
  TempDir dir;
  const std::string path = dir.Join("old.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(ApplyMigrations(**db, {EmbeddedMigrations()[0]}).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> reader = SqliteStore::OpenReadOnly(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition) << reader.status();
  EXPECT_NE(reader.status().message().find("smallem-coordinator --db " + path),
            std::string_view::npos)
      << reader.status();
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*SchemaVersion(**db), 1);
}

}  // namespace
}  // namespace smallem
