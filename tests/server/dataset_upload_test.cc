// Dataset uploads against a real coordinator: what a second stream of the
// same dataset, an offset near the largest integer, a chunk past a file's
// first, or an upload cut short by a stopped coordinator can do — none may
// change a verified file, overflow a bounds check, dodge the disk reserve or
// leave chunks behind.
#include <cstdint>
#include <limits>
#include <string>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "server/service/dataset_upload.h"
#include "server/store/sqlite_store.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"

namespace smallem {
namespace {

using testing::Context;
using testing::ReadFile;
using testing::UploadDirectory;

// A stream that sends every chunk of a dataset directory and waits to be
// finished, as a slow client's would.
class OpenUpload {
 public:
  explicit OpenUpload(v1::ClientService::Stub& stub) : context_(Context()) {
    writer_ = stub.UploadDataset(context_.get(), &response_);
  }
  void Send(const std::string& hash, const std::string& file, const std::string& bytes) {
    v1::DatasetChunk c;
    c.set_content_hash(hash);
    c.set_file_name(file);
    c.set_file_size(static_cast<int64_t>(bytes.size()));
    c.set_offset(0);
    c.set_data(bytes);
    ASSERT_TRUE(writer_->Write(c));
  }
  grpc::Status Finish() {
    writer_->WritesDone();
    return writer_->Finish();
  }
  const v1::UploadDatasetResponse& response() const { return response_; }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  v1::UploadDatasetResponse response_;
  std::unique_ptr<grpc::ClientWriter<v1::DatasetChunk>> writer_;
};

TEST_F(CoordinatorTest, ASecondStreamOfTheSameDatasetCannotReplaceAStoredFile) {
  OpenUpload first(*client_);
  const std::string tokenizer = ReadFile(data_dir_ + "/tokenizer.json");
  first.Send(hash_, "tokenizer.json", tokenizer);
  // Until the coordinator has stored the first stream's chunk (no timing
  // is asserted; the bound only keeps a broken build from hanging).
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<std::vector<DatasetChunkRef>> stored =
        coordinator_->store().ListDatasetChunks(hash_);
    ASSERT_TRUE(stored.ok()) << stored.status();
    if (!stored->empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string evil = tokenizer;
  evil[evil.size() / 2] ^= 1;
  OpenUpload second(*client_);
  second.Send(hash_, "tokenizer.json", evil);
  grpc::Status refused = second.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("never replaced"), std::string::npos)
      << refused.error_message();
  (void)first.Finish();  // the refused stream may have dropped what it shared

  // Whatever happened to the first stream, the dataset that counts holds
  // the original file.
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_).ok());
  v1::FetchDatasetRequest request;
  request.set_content_hash(hash_);
  auto context = Context();
  auto reader = worker_->FetchDataset(context.get(), request);
  std::string fetched;
  v1::DatasetChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.file_name() == "tokenizer.json") fetched += chunk.data();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(fetched, tokenizer);
}

TEST_F(CoordinatorTest, AnUploadOvertakenByAnotherOfTheSameDatasetEndsWithItPresent) {
  const std::string meta = ReadFile(data_dir_ + "/meta.json");
  OpenUpload late(*client_);
  late.Send(hash_, "meta.json", meta);
  for (int i = 0; i < 3000 && coordinator_->store().ListDatasetChunks(hash_)->empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Another client uploads the whole dataset first.
  ASSERT_TRUE(UploadDirectory(*client_, data_dir_, hash_).ok());
  late.Send(hash_, "val.bin", ReadFile(data_dir_ + "/val.bin"));
  grpc::Status status = late.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(late.response().already_present());
}

TEST_F(CoordinatorTest, AnOffsetNearTheLargestIntegerIsRefusedNotWrapped) {
  grpc::Status status =
      UploadTrainChunks(10, {{std::numeric_limits<int64_t>::max() - 1, "abc"}});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("does not fit"), std::string::npos)
      << status.error_message();
}

TEST_F(CoordinatorTest, TheDiskReserveIsCheckedForChunksPastAFilesFirst) {
  Restart({.min_free_disk_bytes = int64_t{1} << 62});  // more than any disk has
  grpc::Status status = UploadTrainChunks(10, {{5, "01234"}});  // no chunk at offset 0
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("--min-free-disk-gb"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(coordinator_->store().ListDatasetChunks(hash_)->empty());
}

TEST_F(CoordinatorTest, AnUploadLeftUnfinishedIsDroppedWhenTheCoordinatorStarts) {
  client_.reset();
  worker_.reset();
  coordinator_.reset();
  {
    // What a coordinator stopped mid-upload leaves in its database.
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.Join("smallem.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)
                    ->PutDatasetChunk(hash_, {.file_name = "train.bin", .file_size = 10,
                                              .offset = 0, .length = 5},
                                      "01234", 0)
                    .ok());
  }
  Start();
  absl::StatusOr<std::vector<DatasetChunkRef>> left =
      coordinator_->store().ListDatasetChunks(hash_);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty()) << left->size() << " chunks of an unfinished upload were kept";
  // The whole dataset uploads afterwards.
  EXPECT_TRUE(UploadDirectory(*client_, data_dir_, hash_).ok());
}

}  // namespace
}  // namespace smallem
